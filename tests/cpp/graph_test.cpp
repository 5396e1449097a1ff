#include <gtest/gtest.h>

#include <memory>

#include "graph/graph.h"
#include "tdl/errors.h"
#include "tdl_fixtures.h"

namespace tilewise::graph {
namespace {

std::shared_ptr<const tdl::OpDesc> conv1d() { return std::make_shared<tdl::OpDesc>(tdl::testing::conv1d()); }

TEST(Graph, InfersShapesAndLinksProducersAndConsumers) {
  Graph g;
  int x = g.add_tensor("x", {8, 16, 34}, Role::kInput);
  int w = g.add_tensor("w", {16, 32, 3}, Role::kParameter);
  int op = g.add_op("conv1d", "conv", "{}", {x, w}, conv1d(), "y", Role::kActivation);
  const TensorNode& y = g.tensor(g.op(op).output);
  EXPECT_EQ(y.shape, (Shape{8, 32, 32}));
  EXPECT_EQ(y.producer, op);
  EXPECT_EQ(g.tensor(x).consumers, std::vector<int>{op});
  EXPECT_EQ(g.num_parameters(), 16 * 32 * 3);
  EXPECT_EQ(g.bytes(Role::kActivation), 8 * 32 * 32 * 4);
  EXPECT_EQ(g.find_op("conv"), op);
  EXPECT_EQ(g.find_tensor("nope"), -1);
}

TEST(Graph, RejectsBadInput) {
  Graph g;
  int x = g.add_tensor("x", {8, 16, 34}, Role::kInput);
  int w = g.add_tensor("w", {15, 32, 3}, Role::kParameter);
  EXPECT_THROW(g.add_tensor("x", {1}, Role::kInput), GraphError);
  EXPECT_THROW(g.add_tensor("n", {-1}, Role::kInput), GraphError);
  EXPECT_THROW(g.add_op("conv1d", "c", "{}", {x, w}, conv1d(), "y", Role::kActivation), ShapeError);
  EXPECT_THROW(g.add_op("conv1d", "c", "{}", {x}, conv1d(), "y", Role::kActivation), GraphError);
  EXPECT_THROW(g.add_op("conv1d", "c", "{}", {x, 7}, conv1d(), "y", Role::kActivation), GraphError);
  EXPECT_THROW(role_from("weights"), GraphError);
  EXPECT_THROW(dtype_size("float8"), GraphError);
}

TEST(Graph, UpdatedCopiesDoNotCountTwice) {
  Graph g;
  int w = g.add_tensor("w", {10}, Role::kParameter);
  int w2 = g.add_tensor("w:new", {10}, Role::kParameter);
  g.set_updates(w2, w);
  EXPECT_EQ(g.num_parameters(), 10);
  EXPECT_EQ(g.bytes(Role::kParameter), 40);
}

TEST(Graph, DotAndSummaryMentionEverything) {
  Graph g;
  int x = g.add_tensor("x", {8, 16, 34}, Role::kInput);
  int w = g.add_tensor("w", {16, 32, 3}, Role::kParameter);
  g.add_op("conv1d", "conv", "{\"stride\": 1}", {x, w}, conv1d(), "y", Role::kActivation);
  std::string d = g.to_dot();
  EXPECT_NE(d.find("o0 -> t2"), std::string::npos);
  EXPECT_NE(g.summary().find("conv1d x1"), std::string::npos);
}

}  // namespace
}  // namespace tilewise::graph
