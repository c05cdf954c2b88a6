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
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Phase is what one way of creating pods measured: a steady rate or a
// burst.
type Phase struct {
	// Pods were created, Bound of them were bound to a node.
	Pods, Bound int
	// Rate is the creation rate asked for (pods/s), 0 for as fast as
	// possible.
	Rate float64
	// Created is how long creating took; Throughput is pods bound per
	// second from the first create to the last binding.
	Created    time.Duration
	Throughput float64
	// P50 and P99 are the times from the create call to the binding, as
	// seen by the client's watch.
	P50, P99 time.Duration
}

// Usage is a process's cost during an arm.
type Usage struct {
	// PeakRSS is the process's lifetime resident-set high-water mark in
	// bytes (each arm starts its processes afresh), CPU its CPU time
	// during the pod phases.
	PeakRSS int64
	CPU     time.Duration
}

// Arm is the result of one arm of the run.
type Arm struct {
	Name        string
	Description string
	// Claims is false for the baseline: the same pods without GPUs.
	Claims bool
	// Policy is the policy allocator's node and GPU policy, empty when the
	// scheduler allocates.
	Policy      string
	Nodes, GPUs int
	Steady      Phase
	Burst       Phase
	// APIRequests is the number of requests the API server answered
	// during the pod phases.
	APIRequests int64
	Scheduler   Usage
	Controller  *Usage   `json:",omitempty"`
	Packing     *Packing `json:",omitempty"`
	// Pending counts the pods left unbound by their PodScheduled reason.
	Pending map[string]int `json:",omitempty"`
	// Problems are failed correctness checks.
	Problems []string `json:",omitempty"`
}

// Save writes the arm as JSON.
func (a *Arm) Save(path string) error {
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("encode arm %s: %w", a.Name, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write arm %s: %w", a.Name, err)
	}
	return nil
}

// LoadArm reads an arm written by Save.
func LoadArm(path string) (*Arm, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read arm result: %w", err)
	}
	var a Arm
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("decode arm result %s: %w", path, err)
	}
	if a.Name == "" {
		return nil, fmt.Errorf("arm result %s: no name", path)
	}
	return &a, nil
}
