package rxe

import (
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// NewAH implements provider.AHContext.
func (c *context) NewAH() (provider.AH, error) { return &ah{life: c.life}, nil }

// ah is rxe's address handle. Kernels since 5.16 keep the address vector
// themselves and return its number, which UD work requests carry.
type ah struct {
	resp      abi.RXECreateAHResp
	life      *lifetime // the context's: an AH number means nothing elsewhere
	destroyed atomic.Bool
}

// Destroyed implements provider.AH: the kernel may give the number to the
// next AH created on the device, of any PD.
func (a *ah) Destroyed() { a.destroyed.Store(true) }

// CreateData implements provider.AH.
func (a *ah) CreateData() (in, out []byte) {
	return nil, unsafe.Slice((*byte)(unsafe.Pointer(&a.resp)), unsafe.Sizeof(a.resp))
}

// Created implements provider.AH. A zero AH number means a kernel older
// than 5.16, which expects the address vector inside every work request;
// goverbs does not build those.
func (a *ah) Created(handle uint32) error {
	if a.resp.AHNum == 0 {
		return transport.NotSupported("rxe: the kernel returned no AH number (kernels before 5.16 need the address vector in each work request)")
	}
	return nil
}

// Num returns the kernel's AH number for UD work requests.
func (a *ah) Num() uint32 { return a.resp.AHNum }
