// Layering probe (CMakeLists.txt, test layering_violation_fails_to_build): cost sits below
// partition, so this include must not be found with cost's include root. If this compiles, the
// build no longer enforces the arrows of DESIGN.md "Data flow".
#include "partition/plan.h"

int tilewise_layering_probe_violation() { return 0; }
