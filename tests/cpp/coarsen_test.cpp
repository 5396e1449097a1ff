// Series-parallel reduction (linearity) and coarsening (Tofu §5.1) on hand-built graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "graph/coarsen.h"
#include "graph/linearity.h"
#include "tdl/strategy.h"

namespace tilewise::graph {
namespace {

using Edges = std::vector<std::pair<int, int>>;

bool sp(int n, const Edges& e) { return reduce_series_parallel(n, e).series_parallel; }

TEST(SeriesParallel, ChainDiamondAndNestedDiamondReduce) {
  EXPECT_TRUE(sp(1, {}));
  EXPECT_TRUE(sp(0, {}));
  EXPECT_TRUE(sp(4, {{0, 1}, {1, 2}, {2, 3}}));                  // chain
  EXPECT_TRUE(sp(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}}));          // diamond (fork-join)
  // Nested: 0 -> {1, 2} -> 5, with 1 itself forking 1 -> {3, 4} -> 5 ... and a skip 0 -> 5.
  EXPECT_TRUE(sp(6, {{0, 1}, {0, 2}, {1, 3}, {1, 4}, {3, 5}, {4, 5}, {2, 5}, {0, 5}}));
  // Two independent chains: parallel between the super terminals.
  EXPECT_TRUE(sp(4, {{0, 1}, {2, 3}}));
  auto r = reduce_series_parallel(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  EXPECT_EQ(r.series_reductions, 4);
  EXPECT_TRUE(r.remaining.empty());
}

TEST(SeriesParallel, NGraphAndGridDoNotReduce) {
  // "N": 0 -> 2, 1 -> 2, 1 -> 3. With the super terminals this is the Wheatstone bridge.
  auto n = reduce_series_parallel(4, {{0, 2}, {1, 2}, {1, 3}});
  EXPECT_FALSE(n.series_parallel);
  EXPECT_FALSE(n.remaining.empty());
  // 2x3 grid, edges right and down: (r, c) = 3r + c.
  Edges grid = {{0, 1}, {1, 2}, {3, 4}, {4, 5}, {0, 3}, {1, 4}, {2, 5}};
  auto g = reduce_series_parallel(6, grid);
  EXPECT_FALSE(g.series_parallel);
  // A 2x2 grid is a diamond.
  EXPECT_TRUE(sp(4, {{0, 1}, {2, 3}, {0, 2}, {1, 3}}));
}

TEST(SeriesParallel, ExplicitTerminalsAndDeadEnds) {
  // A pendant node off the middle of a chain is a dead end unless it is a sink itself.
  Edges e = {{0, 1}, {1, 2}, {1, 3}};
  EXPECT_FALSE(reduce_series_parallel(4, e, {0}, {2}).series_parallel);
  EXPECT_TRUE(reduce_series_parallel(4, e, {0}, {2, 3}).series_parallel);
  // Undirected semantics: a 2-cycle is one edge; self-loops are ignored.
  EXPECT_TRUE(reduce_series_parallel(3, {{0, 1}, {1, 0}, {1, 1}, {1, 2}}, {0}, {2}).series_parallel);
  // An isolated node that is both source and sink is a parallel S-T branch.
  EXPECT_TRUE(reduce_series_parallel(3, {{0, 1}}, {0, 2}, {1, 2}).series_parallel);
  EXPECT_THROW(reduce_series_parallel(2, {{0, 2}}), std::invalid_argument);
  EXPECT_THROW(reduce_series_parallel(2, {{0, 1}}, {5}, {1}), std::invalid_argument);
}

TEST(Linearity, PendantWeightsInsideAForkJoinDoNotBreakIt) {
  // x(0) -> a(1) -> b(2) -> j(3), x -> j (skip), weight w(4) -> b: a residual block.
  Edges e = {{0, 1}, {1, 2}, {2, 3}, {0, 3}, {4, 2}};
  // Joining w to the super source ties the middle of a branch to it: a bridge.
  EXPECT_FALSE(reduce_series_parallel(5, e).series_parallel);
  LinearityResult r = check_linear(5, e);
  EXPECT_TRUE(r.linear);
  EXPECT_EQ(r.pendants, std::vector<int>({4}));
  EXPECT_EQ(r.entries, std::vector<int>({0}));
  EXPECT_EQ(r.exits, std::vector<int>({3}));
  // Pendant trees go whole: w -> t(5) -> b, i.e. a transposed weight; and an unread side output.
  Edges e2 = {{0, 1}, {1, 2}, {2, 3}, {0, 3}, {4, 5}, {5, 2}, {1, 6}, {6, 7}};
  LinearityResult r2 = check_linear(8, e2);
  EXPECT_TRUE(r2.linear);
  EXPECT_EQ(r2.pendants, std::vector<int>({4, 5, 6, 7}));
}

TEST(Linearity, GridsAndCrossingTiesStayNonLinear) {
  Edges grid = {{0, 1}, {1, 2}, {3, 4}, {4, 5}, {0, 3}, {1, 4}, {2, 5}};
  LinearityResult g = check_linear(6, grid);
  EXPECT_FALSE(g.linear);
  EXPECT_TRUE(g.pendants.empty());
  EXPECT_EQ(g.reduction.remaining.size(), 4u);
  // A chain c0 -> c1 -> c2 -> c3 with weight a read by c0, c2 and weight b read by c1, c3.
  Edges ties = {{0, 1}, {1, 2}, {2, 3}, {4, 0}, {4, 2}, {5, 1}, {5, 3}};
  EXPECT_FALSE(check_linear(6, ties).linear);
  // One tie alone is a fork-join (the weight is the fork).
  EXPECT_TRUE(check_linear(5, {{0, 1}, {1, 2}, {2, 3}, {4, 0}, {4, 2}}).linear);
}

TEST(Linearity, CyclesFromMergedTimeStepsUseComponents) {
  // x(0) -> L(1) -> H(2) -> P(3) -> Q(4) -> L: a merged recurrent layer whose state goes through a
  // projection; H -> out(5) is read by nothing. No node lacks in-edges once x is pruned: the
  // terminals come from the component {L, H, P, Q}: entry L (fed by x), exit H (feeds out).
  Edges e = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 1}, {2, 5}};
  LinearityResult r = check_linear(6, e);
  EXPECT_TRUE(r.linear);
  EXPECT_EQ(r.pendants, std::vector<int>({0, 5}));
  EXPECT_EQ(r.entries, std::vector<int>({1}));
  EXPECT_EQ(r.exits, std::vector<int>({2}));
  // Without the pruned output, a mark says where the exit is; with neither, the highest member.
  Edges cyc = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 1}};
  LinearityResult marked = check_linear(5, cyc, {}, {0, 0, 1, 0, 0});
  EXPECT_TRUE(marked.linear);
  EXPECT_EQ(marked.exits, std::vector<int>({2}));
  EXPECT_EQ(check_linear(5, cyc).exits, std::vector<int>({4}));
  // Two members fed by pendants (x -> L, c0 -> C in L -> C -> H -> L, H -> out): one entry, L.
  LinearityResult two = check_linear(6, {{0, 1}, {5, 2}, {1, 2}, {2, 3}, {3, 1}, {3, 4}});
  EXPECT_TRUE(two.linear);
  EXPECT_EQ(two.entries, std::vector<int>({1}));
  EXPECT_EQ(two.exits, std::vector<int>({3}));
  // A state on a two-way edge with its cell (x -> L <-> H, L -> y) is a pendant like any other:
  // the whole graph is a tree and erodes.
  EXPECT_EQ(check_linear(4, {{0, 1}, {1, 2}, {2, 1}, {1, 3}}).pendants.size(), 4u);
  EXPECT_TRUE(check_linear(0, {}).linear);
  EXPECT_THROW(check_linear(2, {{0, 1}}, {1}), std::invalid_argument);
}

// ----- hand-built descriptions ------------------------------------------------------------

using namespace tdl;

IndexExpr v(int i) { return index_var(i); }

/// lambda i, j: f(x[i, j]) (element-wise).
std::shared_ptr<OpDesc> unary_ew(const char* name) {
  auto op = std::make_shared<OpDesc>();
  op->name = name;
  op->inputs = {{"x", 2}};
  op->vars = {{"i", true, {}}, {"j", true, {}}};
  op->output_vars = {0, 1};
  op->body = make_unary(UnaryOp::kTanh, make_access(0, {v(0), v(1)}));
  validate(*op);
  return op;
}

/// lambda i, j: a[i, j] + b[i, j] (element-wise).
std::shared_ptr<OpDesc> binary_ew(const char* name) {
  auto op = std::make_shared<OpDesc>();
  op->name = name;
  op->inputs = {{"a", 2}, {"b", 2}};
  op->vars = {{"i", true, {}}, {"j", true, {}}};
  op->output_vars = {0, 1};
  op->body = make_binary(BinaryOp::kAdd, make_access(0, {v(0), v(1)}), make_access(1, {v(0), v(1)}));
  validate(*op);
  return op;
}

/// lambda i, j: Sum(k: a[i, k] * b[k, j]), with a and/or b transposed.
std::shared_ptr<OpDesc> matmul(const char* name, bool ta = false, bool tb = false) {
  auto op = std::make_shared<OpDesc>();
  op->name = name;
  op->inputs = {{"a", 2}, {"b", 2}};
  op->vars = {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}};
  op->output_vars = {0, 1};
  Expr a = ta ? make_access(0, {v(2), v(0)}) : make_access(0, {v(0), v(2)});
  Expr b = tb ? make_access(1, {v(1), v(2)}) : make_access(1, {v(2), v(1)});
  op->body = make_reduce(Reducer::kSum, {2}, make_binary(BinaryOp::kMul, a, b));
  validate(*op);
  return op;
}

TEST(CoarsenDescs, ElementwiseDetection) {
  EXPECT_TRUE(is_elementwise(*unary_ew("tanh")));
  EXPECT_TRUE(is_elementwise(*binary_ew("add")));
  EXPECT_FALSE(is_elementwise(*matmul("mm")));
}

/// x -> matmul(W1) -> h1 -> tanh -> a1 -> matmul(W2) -> y, with backward ops, a gradient sum
/// for W1 (used twice is faked by two partial gradients) and momentum updates.
struct Mlp {
  Graph g;
  int x, w1, w2, h1, a1, y, mm1, act, mm2;
  int dy, dw2, da1, dh1, dw1a, dw1b, dw1, sum, v1, v1n, w1n, upd_v, upd_w, w2n, upd_w2;
};

Mlp build_mlp() {
  Mlp m;
  Graph& g = m.g;
  m.x = g.add_tensor("x", {8, 16}, Role::kInput);
  m.w1 = g.add_tensor("w1", {16, 32}, Role::kParameter);
  m.w2 = g.add_tensor("w2", {32, 4}, Role::kParameter);
  m.mm1 = g.add_op("matmul", "fc1", "", {m.x, m.w1}, matmul("matmul"), "h1", Role::kActivation);
  m.h1 = g.op(m.mm1).output;
  m.act = g.add_op("tanh", "act", "", {m.h1}, unary_ew("tanh"), "a1", Role::kActivation);
  m.a1 = g.op(m.act).output;
  m.mm2 = g.add_op("matmul", "fc2", "", {m.a1, m.w2}, matmul("matmul"), "y", Role::kActivation);
  m.y = g.op(m.mm2).output;
  // Backward.
  m.dy = g.add_tensor("grad/y", {8, 4}, Role::kGradient);
  g.set_grad_of(m.dy, m.y);
  auto bw = [&](const char* type, const char* name, std::vector<int> in, std::shared_ptr<OpDesc> d, int fwd,
                const char* out) {
    int o = g.add_op(type, name, "", in, d, out, Role::kGradient, std::nullopt, Phase::kBackward, fwd);
    return g.op(o).output;
  };
  m.dw2 = bw("matmul_tn", "fc2.dw", {m.a1, m.dy}, matmul("mm_tn", true, false), m.mm2, "grad/w2");
  m.da1 = bw("matmul_nt", "fc2.dx", {m.dy, m.w2}, matmul("mm_nt", false, true), m.mm2, "grad/a1");
  m.dh1 = bw("tanh_grad", "act.dx", {m.da1, m.a1}, binary_ew("tanh_grad"), m.act, "grad/h1");
  m.dw1a = bw("matmul_tn", "fc1.dw", {m.x, m.dh1}, matmul("mm_tn", true, false), m.mm1, "grad/w1.0");
  m.dw1b = bw("matmul_tn", "fc1.dw2", {m.x, m.dh1}, matmul("mm_tn", true, false), m.mm1, "grad/w1.1");
  m.dw1 = bw("add", "grad/w1.sum", {m.dw1a, m.dw1b}, binary_ew("add"), -1, "grad/w1");
  m.sum = g.tensor(m.dw1).producer;
  for (int t : {m.dw2, m.da1, m.dh1, m.dw1a, m.dw1b, m.dw1}) EXPECT_GE(t, 0);
  g.set_grad_of(m.dw2, m.w2);
  g.set_grad_of(m.da1, m.a1);
  g.set_grad_of(m.dh1, m.h1);
  g.set_grad_of(m.dw1a, m.w1);
  g.set_grad_of(m.dw1b, m.w1);
  g.set_grad_of(m.dw1, m.w1);
  // Momentum for w1 (state v1), plain SGD for w2.
  m.v1 = g.add_tensor("w1.v", {16, 32}, Role::kOptimizerState);
  m.upd_v = g.add_op("add", "opt.w1.v", "", {m.v1, m.dw1}, binary_ew("add"), "w1.v'", Role::kOptimizerState,
                     std::nullopt, Phase::kUpdate);
  m.v1n = g.op(m.upd_v).output;
  g.set_updates(m.v1n, m.v1);
  m.upd_w = g.add_op("add", "opt.w1", "", {m.w1, m.v1n}, binary_ew("add"), "w1'", Role::kParameter, std::nullopt,
                     Phase::kUpdate);
  m.w1n = g.op(m.upd_w).output;
  g.set_updates(m.w1n, m.w1);
  m.upd_w2 = g.add_op("add", "opt.w2", "", {m.w2, m.dw2}, binary_ew("add"), "w2'", Role::kParameter, std::nullopt,
                      Phase::kUpdate);
  m.w2n = g.op(m.upd_w2).output;
  g.set_updates(m.w2n, m.w2);
  return m;
}

TEST(Coarsen, MlpGroupsFollowTheForwardGraph) {
  Mlp m = build_mlp();
  CoarseGraph cg = coarsen(m.g, {false, false});
  // Forward: x, w1, w2 (leaves), fc1, act, fc2 (ops), h1, a1, y (outputs): 9 groups, no merges.
  ASSERT_EQ(cg.groups.size(), 9u);
  EXPECT_EQ(cg.elementwise_merges, 0);
  auto same = [&](int a_op, int b_op) { return cg.op_group[a_op] == cg.op_group[b_op]; };
  EXPECT_TRUE(same(m.g.tensor(m.dw2).producer, m.mm2));
  EXPECT_TRUE(same(m.g.tensor(m.dh1).producer, m.act));
  // Gradients with their forward tensors; the gradient sum with w1; optimizer ops and state too.
  EXPECT_EQ(cg.tensor_group[m.dy], cg.tensor_group[m.y]);
  EXPECT_EQ(cg.tensor_group[m.dh1], cg.tensor_group[m.h1]);
  EXPECT_EQ(cg.op_group[m.sum], cg.tensor_group[m.w1]);
  EXPECT_EQ(cg.tensor_group[m.dw1a], cg.tensor_group[m.w1]);
  for (int t : {m.v1, m.v1n, m.w1n}) EXPECT_EQ(cg.tensor_group[t], cg.tensor_group[m.w1]);
  EXPECT_EQ(cg.op_group[m.upd_v], cg.tensor_group[m.w1]);
  EXPECT_EQ(cg.op_group[m.upd_w], cg.tensor_group[m.w1]);
  EXPECT_EQ(cg.op_group[m.upd_w2], cg.tensor_group[m.w2]);
  EXPECT_EQ(cg.groups[cg.tensor_group[m.w1]].kind, GroupKind::kTensor);
  EXPECT_EQ(cg.groups[cg.op_group[m.mm1]].kind, GroupKind::kOp);
  // Edges mirror the forward graph: 3 ops, 2 + 1 + 2 inputs and 3 outputs.
  EXPECT_EQ(cg.edges.size(), 8u);
  EXPECT_EQ(cg.unmirrored_pairs, 0);
  EXPECT_TRUE(cg.is_linear());
  // Groups come in forward order: x, w1 before fc1, h1 after it.
  EXPECT_LT(cg.tensor_group[m.x], cg.op_group[m.mm1]);
  EXPECT_LT(cg.op_group[m.mm1], cg.tensor_group[m.h1]);
  EXPECT_LT(cg.tensor_group[m.h1], cg.op_group[m.act]);
}

TEST(Coarsen, ElementwiseOpJoinsItsInputGroup) {
  Mlp m = build_mlp();
  CoarseGraph cg = coarsen(m.g);
  EXPECT_EQ(cg.elementwise_merges, 1);
  ASSERT_EQ(cg.groups.size(), 7u);
  int merged = cg.tensor_group[m.h1];
  EXPECT_EQ(cg.groups[merged].kind, GroupKind::kMerged);
  EXPECT_EQ(cg.op_group[m.act], merged);
  EXPECT_EQ(cg.tensor_group[m.a1], merged);
  EXPECT_EQ(cg.tensor_group[m.da1], merged);
  EXPECT_EQ(cg.groups[merged].label, "act");
  EXPECT_TRUE(cg.is_linear());
  EXPECT_NE(cg.summary(m.g).find("1 element-wise/aligned ops"), std::string::npos);
  EXPECT_NE(cg.to_dot().find("octagon"), std::string::npos);
}

/// Two layers of a tanh RNN unrolled over `steps`: cell(l, t) = add(mm(x_lt, W_l), mm(h_l,t-1, U_l)),
/// h = tanh(cell); every op of a step carries key "l<l>/<k>".
struct Rnn {
  Graph g;
  std::vector<int> cell_ops;
};

Rnn build_rnn(int steps, int layers = 2) {
  Rnn r;
  Graph& g = r.g;
  std::vector<int> xs;
  for (int t = 0; t < steps; ++t) xs.push_back(g.add_tensor("x" + std::to_string(t), {4, 8}, Role::kInput));
  for (int l = 0; l < layers; ++l) {
    std::string L = "l" + std::to_string(l);
    int w = g.add_tensor(L + ".w", {8, 8}, Role::kParameter);
    int u = g.add_tensor(L + ".u", {8, 8}, Role::kParameter);
    int h = g.add_tensor(L + ".h0", {4, 8}, Role::kInput);
    for (int t = 0; t < steps; ++t) {
      std::string T = L + ".t" + std::to_string(t);
      auto add = [&](const char* type, const std::string& name, std::vector<int> in, std::shared_ptr<OpDesc> d,
                     int k) {
        int o = g.add_op(type, name, "", in, d, name, Role::kActivation, std::nullopt, Phase::kForward, -1,
                         L + "/" + std::to_string(k));
        return g.op(o).output;
      };
      int a = add("matmul", T + ".xw", {xs[t], w}, matmul("matmul"), 0);
      int b = add("matmul", T + ".hu", {h, u}, matmul("matmul"), 1);
      int c = add("add", T + ".add", {a, b}, binary_ew("add"), 2);
      h = add("tanh", T + ".tanh", {c}, unary_ew("tanh"), 3);
      xs[t] = h;  // the next layer reads this layer's output
      r.cell_ops.push_back(g.tensor(h).producer);
    }
  }
  return r;
}

TEST(Coarsen, RnnGridIsLinearOnlyAfterMergingTimeSteps) {
  Rnn r = build_rnn(3);
  CoarseGraph grid = coarsen(r.g, {true, false});
  EXPECT_FALSE(grid.is_linear());
  EXPECT_FALSE(grid.linearity.reduction.remaining.empty());
  CoarseGraph chain = coarsen(r.g);
  EXPECT_TRUE(chain.is_linear());
  EXPECT_EQ(chain.timestep_merges, 2 * 4 * 2);  // 2 layers x 4 ops x (3 - 1) steps
  // Per layer: xw, hu, and [add + tanh + their outputs + hu's output]; plus x, w, u, h0.
  for (int l = 0; l < 2; ++l) {
    int first = r.cell_ops[3 * l], last = r.cell_ops[3 * l + 2];
    EXPECT_EQ(chain.op_group[first], chain.op_group[last]);
  }
  EXPECT_NE(chain.op_group[r.cell_ops[0]], chain.op_group[r.cell_ops[3]]);
  // The per-step inputs x0..x2 (all leaves at position 0 of layer 0's xw) merged.
  EXPECT_EQ(chain.tensor_group[r.g.find_tensor("x0")], chain.tensor_group[r.g.find_tensor("x2")]);
}

TEST(Coarsen, EmptyGraphIsLinear) {
  Graph g;
  CoarseGraph cg = coarsen(g);
  EXPECT_TRUE(cg.groups.empty());
  EXPECT_TRUE(cg.is_linear());
}

}  // namespace
}  // namespace tilewise::graph
