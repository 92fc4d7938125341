package cronpeers

import (
	"flag"
	"fmt"
	"strings"
	"testing"
)

var libsFlag = flag.String("libs", strings.Join(Libs, ","), "comma-separated schedulers to measure")

// BenchmarkPeers runs the workload (see the package documentation) at 10k,
// 100k and 1M jobs, each library in turn within one op, and reports each
// library's figures (suffix -lib) and ksana's ratios against robfig's in
// the same op (ksana-once's against robfig-once's): add-ratio,
// add-cpu-ratio, ready-ratio and bytes-ratio (the goal at 1M is at most 1
// for each). ksana-once is also set against ids-once, the floor of giving
// each job a random id and indexing it, and ids-once against
// robfig-once. An op takes from about 20 s (10k) to minutes (1M):
// run it with -benchtime=1x.
func BenchmarkPeers(b *testing.B) {
	libs := strings.Split(*libsFlag, ",")
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("jobs=%s", count(n)), func(b *testing.B) {
			for b.Loop() {
				got := map[string]Result{}
				for _, lib := range libs {
					res, err := Measure(lib, n, Params{})
					if err != nil {
						b.Fatal(err)
					}
					got[lib] = res
					b.ReportMetric(res.Add.Seconds(), "add-s-"+lib)
					b.ReportMetric(res.Ready.Seconds(), "ready-s-"+lib)
					b.ReportMetric(res.AddCPU.Seconds(), "add-cpu-s-"+lib)
					b.ReportMetric(res.BytesPerJob, "bytes/job-"+lib)
					b.ReportMetric(ms(res.P50), "p50-lag-ms-"+lib)
					b.ReportMetric(ms(res.P99), "p99-lag-ms-"+lib)
					b.ReportMetric(ms(res.Max), "max-lag-ms-"+lib)
					if res.Fired < res.Want || res.Want == 0 && lib != "ids-once" {
						b.Errorf("%s: %d of the %d runs due in the window fired", lib, res.Fired, res.Want)
					}
				}
				for _, pair := range [][2]string{{"ksana", "robfig"}, {"ksana-every", "robfig"}, {"ksana-once", "robfig-once"}, {"ksana-once", "ids-once"}, {"ids-once", "robfig-once"}} {
					lib, peer := pair[0], pair[1]
					k, ok := got[lib]
					base, ok2 := got[peer]
					if !ok || !ok2 {
						continue
					}
					b.ReportMetric(k.Add.Seconds()/base.Add.Seconds(), "add-ratio-"+lib+"/"+peer)
					b.ReportMetric(k.Ready.Seconds()/base.Ready.Seconds(), "ready-ratio-"+lib+"/"+peer)
					b.ReportMetric(k.AddCPU.Seconds()/base.AddCPU.Seconds(), "add-cpu-ratio-"+lib+"/"+peer)
					b.ReportMetric(k.BytesPerJob/base.BytesPerJob, "bytes-ratio-"+lib+"/"+peer)
				}
			}
		})
	}
}
