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

package discoverytest

import (
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// H200Multiprocessors is the SM count the mock reports for an H200 SXM5.
const H200Multiprocessors = 132

// waitPoll is how long the mock event set waits for an event before it
// reports a timeout, short so that tests stay fast.
const waitPoll = 10 * time.Millisecond

// Server is a DGX H200 (8 GPUs) as go-nvml's mock describes it. GPUs 0-3 sit
// on NUMA node 0 and 4-7 on node 1, as on a two-socket machine.
type Server struct {
	*server.Server
	// EventSet is returned by EventSetCreate; its Wait delivers what is sent
	// on Events and otherwise times out.
	EventSet *mock.EventSet
	// Events feeds EventSet.Wait. Unbuffered: a send returns once the
	// watcher has taken the event.
	Events chan nvml.EventData
}

// NewDGXH200 returns a ready mock. Override any func field to inject errors.
func NewDGXH200() *Server {
	s := &Server{Server: dgxh200.New(), Events: make(chan nvml.EventData)}
	s.EventSet = &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			select {
			case e := <-s.Events:
				return e, nvml.SUCCESS
			case <-time.After(waitPoll):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return s.EventSet, nvml.SUCCESS }
	for i := range s.Devices {
		dev := s.Device(i)
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: NVMLBusID(dev.PciBusID), PciDeviceId: dev.Config.PciDeviceId}, nvml.SUCCESS
		}
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return dev.Index / 4, nvml.SUCCESS }
		dev.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
			return nvml.DeviceAttributes{MultiprocessorCount: H200Multiprocessors, MemorySizeMB: dev.Config.MemoryMB}, nvml.SUCCESS
		}
		dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	return s
}

// Device returns the mock GPU with NVML index i.
func (s *Server) Device(i int) *server.Device {
	return s.Devices[i].(*server.Device)
}

// NVMLBusID renders a sysfs bus id ("0000:3b:00.0") the way NVML returns it:
// 8-digit domain, upper case, NUL-terminated.
func NVMLBusID(busID string) [32]int8 {
	var out [32]int8
	for i, c := range "0000" + strings.ToUpper(busID) {
		out[i] = int8(c)
	}
	return out
}
