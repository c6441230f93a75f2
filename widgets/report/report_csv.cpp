// CSV of every sample (see report_csv.h).
#include "widgets/report/report_csv.h"

#include "widgets/report/report_text.h"

namespace lathe::report {

int64_t write_samples_csv(const Store& store, const std::vector<std::string>& run_ids, std::ostream& out) {
  out << "run_id,metric,step,wall_ms,value\r\n";
  int64_t n = 0;
  for (const std::string& id : run_ids) {
    const std::string run_field = csv_field(id);
    std::string last_metric, metric_field;
    store.for_each_sample(id, [&](const std::string& metric, const Point& p) {
      if (metric != last_metric) {
        last_metric = metric;
        metric_field = csv_field(metric);
      }
      out << run_field << ',' << metric_field << ',' << p.step << ',' << exact_number(p.wall_ms) << ','
          << exact_number(p.value) << "\r\n";
      ++n;
    });
  }
  return n;
}

}  // namespace lathe::report
