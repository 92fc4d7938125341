// Command cronpeers runs the workload of package cronpeers on robfig/cron,
// gocron and ksana's cron.Runner at the sizes given, and prints a table of
// add time, bytes per job and firing lag (none for ids-once, the floor of
// an add that gives each job a random id and indexes it).
//
//	go run ./cmd/cronpeers -jobs 10000,100000,1000000 -libs robfig,gocron,ksana,ksana-every
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/bench/cronpeers"
)

func main() {
	jobs := flag.String("jobs", "10000,100000,1000000", "comma-separated job counts")
	libs := flag.String("libs", strings.Join(cronpeers.Libs, ","), "comma-separated schedulers")
	rate := flag.Int("rate", 1000, "jobs that fire each second")
	window := flag.Duration("window", 10*time.Second, "how long the firing lag is sampled")
	flag.Parse()

	const row = "%-12s %8s %8s %10s %8s %10s %8s %8s %8s %12s\n"
	fmt.Printf(row, "lib", "jobs", "add s", "add cpu s", "ready s", "bytes/job", "p50 ms", "p99 ms", "max ms", "fired")
	for _, js := range strings.Split(*jobs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(js))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "cronpeers: bad job count %q\n", js)
			os.Exit(2)
		}
		for _, lib := range strings.Split(*libs, ",") {
			res, err := cronpeers.Measure(strings.TrimSpace(lib), n, cronpeers.Params{Rate: *rate, Window: *window})
			if err != nil {
				fmt.Fprintln(os.Stderr, "cronpeers:", err)
				os.Exit(1)
			}
			p50, p99, worst, fired := f(ms(res.P50), 2), f(ms(res.P99), 2), f(ms(res.Max), 2), fmt.Sprintf("%d/%d", res.Fired, res.Want)
			if res.Want == 0 {
				p50, p99, worst, fired = "-", "-", "-", "-" // nothing fires (ids-once)
			}
			fmt.Printf(row, res.Lib, strconv.Itoa(res.Jobs),
				f(res.Add.Seconds(), 3), f(res.AddCPU.Seconds(), 3), f(res.Ready.Seconds(), 3), f(res.BytesPerJob, 1),
				p50, p99, worst, fired)
		}
	}
}

func f(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
