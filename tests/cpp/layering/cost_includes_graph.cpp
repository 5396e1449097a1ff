// Layering probe (CMakeLists.txt, test layering_allowed_include_builds): the positive control for
// cost_includes_partition.cpp. cost may include graph and tdl, so this compiles with cost's include
// root; if it did not, the negative probe would prove nothing.
#include "cost/comm_cost.h"
#include "graph/graph.h"

int tilewise_layering_probe_allowed() { return 0; }
