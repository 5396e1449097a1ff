// Correctly rounded sums of doubles (Shewchuk's exact partials, rounded once at the end): the
// same result in any order, equal to Python's math.fsum. Reported frontier costs are computed
// with it, so that a point's (time, memory) does not depend on the order the search added them.
#pragma once
#include <vector>

namespace tilewise::partition {

/// The sum of `terms` rounded once to the nearest double (ties to even).
double exact_sum(const std::vector<double>& terms);

}  // namespace tilewise::partition
