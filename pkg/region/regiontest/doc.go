// Package regiontest writes shared regions in chosen states for tests of
// the region reader and the monitor. Its byte layout is checked against a C
// writer compiled from vgpu_region.h by the region package's tests.
package regiontest
