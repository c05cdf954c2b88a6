package region

import (
	"testing"
)

// FuzzParse feeds arbitrary bytes, padded or cut to the region size, over a
// valid region's header and first records: parsing must never panic, and
// whatever it accepts must respect the documented bounds.
func FuzzParse(f *testing.F) {
	valid := fixtureBytes(f)
	f.Add(valid[:SlotsOffset+SlotSize])
	f.Add(make([]byte, 64))
	b := make([]byte, Size)
	f.Fuzz(func(t *testing.T, prefix []byte) {
		copy(b, valid)
		copy(b, prefix)
		r, err := Parse(b)
		if err != nil {
			if r != nil {
				t.Fatalf("error %v with a region", err)
			}
			return
		}
		if r.State != StateReady && (len(r.Devices) > 0 || len(r.Processes) > 0) {
			t.Fatalf("state %v with content", r.State)
		}
		if len(r.Devices) > MaxDevices {
			t.Fatalf("%d devices", len(r.Devices))
		}
		for _, d := range r.Devices {
			if d.UUID == "" || d.SMLimitPercent > 100 || d.SMUtilPercent > 100 || d.PeakBytes < d.UsedBytes {
				t.Fatalf("unclamped device %+v", d)
			}
		}
		for _, p := range r.Processes {
			if p.PID == 0 || len(p.Devices) != len(r.Devices) {
				t.Fatalf("bad process %+v", p)
			}
			for _, u := range p.Devices {
				if u.SMUtilPercent > 100 || u.PeakBytes < u.UsedBytes {
					t.Fatalf("unclamped usage %+v", u)
				}
			}
		}
	})
}
