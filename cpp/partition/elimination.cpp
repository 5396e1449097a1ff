#include "partition/elimination.h"

namespace tilewise::partition {

EliminationResult eliminate(const std::vector<int>& domain_sizes, std::vector<Factor> factors,
                            const EliminationOptions& options) {
  EngineOptions eo;
  eo.order.order = options.order;
  eo.order.max_table = options.max_table;
  eo.order.deadline = options.deadline;
  eo.order.too_wide = TooWide::kThrow;
  eo.threads = 1;  // the planners' tables are small and their searches already run beside each other
  eo.progress = options.progress;
  Solution<MinSum> s = eliminate_all(MinSum{}, domain_sizes, std::move(factors), eo);
  return {s.assignment(), s.value(), s.stats.largest_table};
}

}  // namespace tilewise::partition
