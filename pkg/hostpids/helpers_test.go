package hostpids

import (
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/claims/claimstest"
)

const (
	gib   = claimstest.GiB
	mib   = uint64(1) << 20
	uuid0 = claimstest.GPU0
	uidA  = claimstest.ClaimA
	uidB  = claimstest.ClaimB
)
