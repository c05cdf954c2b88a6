package region

import "unsafe"

// unsafePointer points into a shared mapping, for the seqlock writer of the
// tests; the reader itself never maps a region.
func unsafePointer(m []byte, off int) unsafe.Pointer { return unsafe.Pointer(&m[off]) }
