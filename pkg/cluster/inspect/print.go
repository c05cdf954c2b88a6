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

package inspect

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"
)

const none = "<none>"

// PrintNodes writes the GPU table of `kubectl vgpu nodes`; wide adds the
// GPU UUID.
func PrintNodes(out io.Writer, rows []GPURow, wide bool) error {
	w := newTable(out)
	head := "NODE\tGPU\tMODE\tPRODUCT\tMEMORY\tALLOCATED\tUSED\tCORES\tCORES-ALLOC\tCLAIMS\tHEALTH\tTAINTS"
	if wide {
		head += "\tUUID"
	}
	w.println(head)
	for _, r := range rows {
		taints := none
		if len(r.Taints) > 0 {
			taints = strings.Join(r.Taints, ",")
		}
		capacity := FormatBytes(r.MemoryCapacity)
		if r.MemoryCapacity == 0 {
			capacity = "-" // a GPU seen only through its MIG devices
		}
		line := strings.Join([]string{r.Node, r.GPU, orDash(r.Mode), orDash(r.Product), capacity,
			withShare(r.MemoryAllocated, r.MemoryCapacity, FormatBytes), optBytes(r.MemoryUsed),
			strconv.FormatInt(r.CoresCapacity, 10), withShare(r.CoresAllocated, r.CoresCapacity, formatCores),
			strconv.Itoa(r.Claims), r.Health, taints}, "\t")
		if wide {
			line += "\t" + orDash(r.UUID)
		}
		w.println(line)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return printMIGLayout(out, rows)
}

// printMIGLayout writes, when a GPU is in MIG mode, the instances of each
// such GPU: an admin's (static) and those allocated to claims (dynamic,
// created at prepare); free placements are not listed.
func printMIGLayout(out io.Writer, rows []GPURow) error {
	w := newTable(out)
	head := false
	for _, r := range rows {
		if r.MIG == "" {
			continue
		}
		if !head {
			w.println("\nNODE\tGPU\tMODE\tINSTANCE\tPROFILE\tSLICES\tKIND\tCLAIMS")
			head = true
		}
		if len(r.Instances) == 0 {
			w.printf("%s\t%s\t%s\t%s\t-\t-\t-\t-\n", r.Node, r.GPU, r.MIG, none)
		}
		for _, in := range r.Instances {
			kind := "dynamic"
			if in.Static {
				kind = "static"
			}
			slices := strconv.FormatInt(in.PlacementStart, 10)
			if in.PlacementSize > 1 {
				slices += "-" + strconv.FormatInt(in.PlacementStart+in.PlacementSize-1, 10)
			}
			claims := none
			if len(in.Claims) > 0 {
				claims = strings.Join(in.Claims, ",")
			}
			w.printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, r.GPU, r.MIG, in.Device, in.Profile, slices, kind, claims)
		}
	}
	return w.Flush()
}

// PrintClaims writes the claim table of `kubectl vgpu claims`; the
// namespace column appears for all namespaces, wide adds the GPU UUID.
func PrintClaims(out io.Writer, rows []ClaimRow, allNamespaces, wide bool) error {
	w := newTable(out)
	head := "CLAIM\tPODS\tSTATE\tNODE\tGPU\tGUARANTEE\tLIMIT\tBURST\tCORES\tUSED\tPEAK\tREFUSALS\tSM-UTIL"
	if allNamespaces {
		head = "NAMESPACE\t" + head
	}
	if wide {
		head += "\tUUID"
	}
	w.println(head)
	for _, r := range rows {
		pods := none
		if len(r.Pods) > 0 {
			pods = strings.Join(r.Pods, ",")
		}
		cells := []string{r.Claim, pods, r.State, orDash(r.Node), orDash(r.GPU)}
		if r.State == StateAllocated {
			cells = append(cells, FormatBytes(r.MemoryGranted), FormatBytes(r.MemoryLimit), optBytes(r.MemoryBurst),
				strconv.FormatInt(r.CoresGranted, 10))
		} else {
			cells = append(cells, "-", "-", "-", "-")
		}
		cells = append(cells, optBytes(r.MemoryUsed), optBytes(r.MemoryPeak), optInt(r.Refusals, ""), optInt(r.SMUtilization, "%"))
		if allNamespaces {
			cells = append([]string{r.Namespace}, cells...)
		}
		if wide {
			cells = append(cells, orDash(r.UUID))
		}
		w.println(strings.Join(cells, "\t"))
	}
	return w.Flush()
}

// PrintWhy writes the explanation of `kubectl vgpu why`: the summary, the
// claims, the nodes, the GPUs and the suggestion. Without wide, GPUs where
// the request fits are left out when some GPU refuses it.
func PrintWhy(out io.Writer, exp *Explanation, wide bool) error {
	text := &stickyWriter{w: out}
	text.printf("Pod %s/%s (%s): %s\n", exp.Namespace, exp.Pod, exp.Phase, exp.Summary)
	if text.err != nil {
		return text.err
	}
	w := newTable(out)
	w.println("\nCLAIM\tSTATE\tNODE\tREQUESTS")
	for _, c := range exp.Claims {
		name := c.Claim
		if name == "" {
			name = c.Entry + " (template " + c.Template + ")"
		}
		w.printf("%s\t%s\t%s\t%s\n", name, c.State, orDash(c.Node), strings.Join(c.Requests, "; "))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	w = newTable(out)
	if len(exp.Nodes) > 0 {
		w.println("\nNODE\tFITS\tWHY\tFITS IF")
		for _, n := range exp.Nodes {
			w.printf("%s\t%s\t%s\t%s\n", n.Node, yesNo(n.Fits), n.Reason, orDash(n.FitsIf))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	w = newTable(out)
	if len(exp.GPUs) > 0 {
		w.println("\nNODE\tGPU\tCLAIM\tREQUEST\tFITS\tWHY\tFITS IF")
		for _, v := range exp.GPUs {
			if v.Fits && !wide {
				continue
			}
			why := strings.Join(v.Reasons, "; ")
			if v.Fits {
				why = "fits"
			}
			w.printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Node, v.GPU, v.Claim, v.Request, yesNo(v.Fits), why, orDash(v.FitsIf))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if exp.Suggestion != "" {
		text.printf("\nSmallest change: %s.\n", exp.Suggestion)
	}
	return text.err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func optBytes(v *int64) string {
	if v == nil {
		return "-"
	}
	return FormatBytes(*v)
}

func optInt(v *int64, unit string) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10) + unit
}

// withShare writes an amount with its share of the total: "6Gi (37%)".
func withShare(v, total int64, unit func(int64) string) string {
	if total <= 0 {
		return unit(v)
	}
	return fmt.Sprintf("%s (%d%%)", unit(v), v*100/total)
}

// stickyWriter keeps the first write error and skips every write after it,
// so a table is written with plain calls and the error checked once.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) printf(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

func (s *stickyWriter) println(line string) {
	if s.err == nil {
		_, s.err = fmt.Fprintln(s.w, line)
	}
}

// table aligns tab-separated cells in columns, as kubectl prints them.
type table struct {
	stickyWriter
	tw interface{ Flush() error }
}

func newTable(out io.Writer) *table {
	tw := printers.GetNewTabWriter(out)
	return &table{stickyWriter: stickyWriter{w: tw}, tw: tw}
}

// Flush writes the aligned table and returns the first error.
func (t *table) Flush() error {
	if t.err != nil {
		return t.err
	}
	return t.tw.Flush()
}
