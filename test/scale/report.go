/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package scale

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Arm names: the baseline, the scheduler allocating the claims, and the
// policy allocator with each node/GPU policy.
const (
	ArmBaseline  = "a-baseline"
	ArmScheduler = "b-scheduler"
	ArmBinpack   = "c-binpack"
	ArmSpread    = "c-spread"
)

// Goals of the run (docs/scale.md). They are printed next to the figures;
// missing one does not fail the run.
const (
	GoalSchedulerVsBaseline = 0.5
	GoalPolicyVsScheduler   = 0.8
	GoalSteadyP99           = 2 * time.Second
	GoalControllerRSS       = 512 << 20
)

// Report prints the table of arms, the ratios and the goals to w, and
// returns the correctness failures: the problems found in each arm, and
// binpack using more GPUs than spread. The report is composed in memory and
// written with one call, whose error is returned.
func Report(w io.Writer, arms []*Arm) ([]string, error) {
	byName := map[string]*Arm{}
	for _, a := range arms {
		byName[a.Name] = a
	}
	var rows, out bytes.Buffer
	fmt.Fprintln(&rows, "arm\tpods\tburst pods/s\tburst p50\tburst p99\tsteady pods/s\tsteady p50\tsteady p99\tAPI requests\tscheduler RSS\tscheduler CPU\tcontroller RSS\tcontroller CPU\tGPUs used\tnodes used\tfree on partial GPUs\t")
	for _, a := range arms {
		ctrlRSS, ctrlCPU, used, nodes, free := "-", "-", "-", "-", "-"
		if a.Controller != nil {
			ctrlRSS, ctrlCPU = mib(a.Controller.PeakRSS), secs(a.Controller.CPU)
		}
		if a.Packing != nil {
			used = fmt.Sprintf("%d/%d", a.Packing.Used, a.Packing.GPUs)
			nodes = fmt.Sprint(a.Packing.Nodes)
			free = fmt.Sprintf("%.0f GiB", float64(a.Packing.FreeOnPartial)/(1<<30))
		}
		fmt.Fprintf(&rows, "%s\t%d\t%.1f\t%s\t%s\t%.1f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			a.Name, a.Steady.Pods+a.Burst.Pods, a.Burst.Throughput, ms(a.Burst.P50), ms(a.Burst.P99),
			a.Steady.Throughput, ms(a.Steady.P50), ms(a.Steady.P99), a.APIRequests,
			mib(a.Scheduler.PeakRSS), secs(a.Scheduler.CPU), ctrlRSS, ctrlCPU, used, nodes, free)
	}
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	if _, err := tw.Write(rows.Bytes()); err != nil {
		return nil, fmt.Errorf("align the report: %w", err)
	}
	if err := tw.Flush(); err != nil {
		return nil, fmt.Errorf("align the report: %w", err)
	}

	fmt.Fprintln(&out)
	ratio := func(label, num, den string, goal float64) {
		n, d := byName[num], byName[den]
		if n == nil || d == nil || d.Burst.Throughput == 0 {
			return
		}
		r := n.Burst.Throughput / d.Burst.Throughput
		fmt.Fprintf(&out, "%-34s %.2f   goal >= %.1f: %s\n", label, r, goal, verdict(r >= goal))
	}
	ratio("burst pods/s (b)/(a):", ArmScheduler, ArmBaseline, GoalSchedulerVsBaseline)
	ratio("burst pods/s (c binpack)/(b):", ArmBinpack, ArmScheduler, GoalPolicyVsScheduler)
	ratio("burst pods/s (c spread)/(b):", ArmSpread, ArmScheduler, GoalPolicyVsScheduler)
	for _, a := range arms {
		if a.Steady.Pods > 0 {
			fmt.Fprintf(&out, "%-34s %s   goal <= %s: %s\n", fmt.Sprintf("steady %.0f pods/s p99, %s:", a.Steady.Rate, a.Name),
				ms(a.Steady.P99), GoalSteadyP99, verdict(a.Steady.P99 <= GoalSteadyP99))
		}
	}
	for _, a := range arms {
		if a.Controller != nil && a.Claims {
			fmt.Fprintf(&out, "%-34s %s   goal <= %s: %s\n", "dra-controller peak RSS, "+a.Name+":",
				mib(a.Controller.PeakRSS), mib(GoalControllerRSS), verdict(a.Controller.PeakRSS <= GoalControllerRSS))
		}
	}

	var failures []string
	for _, a := range arms {
		for _, p := range a.Problems {
			failures = append(failures, a.Name+": "+p)
		}
		if len(a.Pending) > 0 {
			var parts []string
			for _, reason := range slices.Sorted(maps.Keys(a.Pending)) {
				parts = append(parts, fmt.Sprintf("%d %s", a.Pending[reason], reason))
			}
			fmt.Fprintf(&out, "%s: pods left Pending: %s\n", a.Name, strings.Join(parts, ", "))
		}
	}
	if b, s := byName[ArmBinpack], byName[ArmSpread]; b != nil && s != nil && b.Packing != nil && s.Packing != nil {
		if b.Packing.Used > s.Packing.Used {
			failures = append(failures, fmt.Sprintf("binpack uses %d GPUs, more than spread's %d", b.Packing.Used, s.Packing.Used))
		} else {
			fmt.Fprintf(&out, "binpack uses %d GPUs, spread %d: binpack uses no more\n", b.Packing.Used, s.Packing.Used)
		}
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		return failures, fmt.Errorf("write the report: %w", err)
	}
	return failures, nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
