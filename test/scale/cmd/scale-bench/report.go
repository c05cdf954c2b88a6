package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/vgpu-dra/vgpu-dra-driver/test/scale"
)

// runReport prints the table of the arms' results and fails when a
// correctness check failed.
func runReport(paths []string) error {
	if len(paths) == 0 {
		return fmt.Errorf("report: name the arms' result files")
	}
	var arms []*scale.Arm
	for _, p := range paths {
		a, err := scale.LoadArm(p)
		if err != nil {
			return err
		}
		arms = append(arms, a)
	}
	failures, err := scale.Report(os.Stdout, arms)
	if err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("correctness checks failed:\n  %s", joinLines(failures))
	}
	fmt.Println("correctness: every check passed")
	return nil
}

func joinLines(lines []string) string { return strings.Join(lines, "\n  ") }
