// The coarsened frontier problem (cpp/frontier/coarse_ties.*): a group's node costs are its members'
// summed at the configurations the group dictates, edges inside a group fold into its node, edges
// between the same two variables add up, and a coarse choice expands to every variable. Checked
// against enumeration of the tied space on a hand-made problem.
#include <gtest/gtest.h>

#include <vector>

#include "frontier/coarse_ties.h"
#include "partition/pareto.h"

namespace tilewise::frontier {
namespace {

using partition::ParetoEdge;
using partition::ParetoProblem;
using partition::Point;

// Variables: 0 (tensor, 2 configs), 1 (op, 3 configs) following 0 as {0 -> 2, 1 -> 0}, 2 (free, 2).
ParetoProblem problem() {
  ParetoProblem p;
  p.nodes = {{{0, 4}, {0, 1}}, {{3, 0}, {5, 0}, {7, 0}}, {{1, 0}, {2, 0}}};
  p.edges = {
      ParetoEdge{0, 1, {{0.5, 0}, {0.25, 0}, {0.125, 0}, {1, 0}, {2, 0}, {4, 0}}},  // inside the group
      ParetoEdge{1, 2, {{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}}},           // group -> free
      ParetoEdge{2, 0, {{8, 1}, {16, 2}, {32, 3}, {64, 4}}},                         // free -> group
  };
  return p;
}

Ties ties() {
  Ties t;
  t.group = {0, 0, -1};
  t.members = {{0, 1}};
  t.of = {{{0, 1}, {2, 0}}};
  t.tied_ops = 1;
  return t;
}

TEST(CoarseTies, GroupsSumNodesFoldInnerEdgesAndMergeParallelOnes) {
  const Coarsened c = coarsen(problem(), ties());
  ASSERT_EQ(c.variable, (std::vector<int>{0, 2}));
  EXPECT_EQ(c.coarse, (std::vector<int>{0, 0, 1}));
  ASSERT_EQ(c.problem.nodes.size(), 2u);
  // Group config 0: tensor 0 (0, 4) + op 2 (7, 0) + edge (0, 2) 0.125; config 1: (0, 1) + op 0 (3, 0) + edge (1, 0) 1.
  EXPECT_EQ(c.problem.nodes[0][0].time, 7.125);
  EXPECT_EQ(c.problem.nodes[0][0].memory, 4);
  EXPECT_EQ(c.problem.nodes[0][1].time, 4);
  EXPECT_EQ(c.problem.nodes[0][1].memory, 1);
  ASSERT_EQ(c.problem.edges.size(), 1u);  // (1, 2) and (2, 0) both join the group and variable 2
  const auto& e = c.problem.edges[0];
  EXPECT_EQ(e.u, 0);
  EXPECT_EQ(e.v, 1);
  // (group i, free j): edge(1,2)[op(i)][j] + edge(2,0)[j][tensor(i)].
  EXPECT_EQ(e.table[0].time, 5 + 8);   // i=0: op 2, tensor 0; j=0
  EXPECT_EQ(e.table[1].time, 6 + 32);  // j=1
  EXPECT_EQ(e.table[2].time, 1 + 16);  // i=1: op 0, tensor 1; j=0
  EXPECT_EQ(e.table[3].time, 2 + 64);
  EXPECT_EQ(e.table[3].memory, 4);
}

TEST(CoarseTies, TheCoarseFrontierIsTheTiedSpacesAndExpandsToFullChoices) {
  const ParetoProblem full = problem();
  const Ties t = ties();
  const Coarsened c = coarsen(full, t);
  const partition::ParetoSolution coarse = partition::solve_pareto(c.problem);
  // Enumerate the tied space: tensor config a decides the op's; variable 2 free.
  std::vector<Point> all;
  for (int a = 0; a < 2; ++a)
    for (int f = 0; f < 2; ++f) all.push_back(partition::evaluate_pareto(full, {a, t.of[0][1][a], f}));
  std::vector<Point> want;
  for (int i : partition::reduce_indices(all)) want.push_back(all[i]);
  ASSERT_EQ(coarse.points.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const std::vector<int> choice = expand(coarse.choices[i], c, t);
    ASSERT_EQ(choice.size(), 3u);
    EXPECT_EQ(choice[1], t.of[0][1][choice[0]]);
    const Point p = partition::evaluate_pareto(full, choice);
    EXPECT_EQ(p.time, want[i].time);
    EXPECT_EQ(p.memory, want[i].memory);
  }
}

TEST(CoarseTies, NoTiesLeaveTheProblemAsItIs) {
  Ties none;
  none.group.assign(3, -1);
  const Coarsened c = coarsen(problem(), none);
  EXPECT_EQ(c.variable, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c.problem.edges.size(), 3u);
  EXPECT_EQ(expand({1, 2, 0}, c, none), (std::vector<int>{1, 2, 0}));
}

}  // namespace
}  // namespace tilewise::frontier
