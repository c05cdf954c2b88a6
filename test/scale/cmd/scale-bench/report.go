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
