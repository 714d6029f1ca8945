package mlx5

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

// AH is an mlx5 address handle: the 48-byte address vector every UD WQE
// carries, built as libmlx5's mlx5_create_ah builds it; on RoCE the
// destination MAC comes from the kernel's CREATE_AH response.
type AH struct {
	av        [datagramSegSize]byte // struct mlx5_wqe_av, big endian
	resp      abi.MLX5CreateAHResp
	eth       bool
	ctx       *Context
	destroyed atomic.Bool
}

// The rates of enum ibv_rate in mlx5's encoding (ib_to_mlx5_rate_table).
var ibToMLX5Rate = [...]uint8{0, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 11, 13, 15, 0, 9, 15, 0, 0, 9, 13, 0, 0}

const (
	grhFlowLabelMask = 0x000fffff
	roceUDPSportMin  = 0xc000
	roceUDPSportMax  = 0xffff
	avOffDQPDCT      = 8
	avOffStatRateSL  = 12
	avOffFlMlid      = 13
	avOffRlid        = 14
	avOffRmac        = 20
	avOffTclass      = 26
	avOffHopLimit    = 27
	avOffGrhGidFl    = 28
	avOffRgid        = 32
	avOffQkey        = 0
)

// NewAH implements provider.AHContext.
func (c *Context) NewAH() (provider.AH, error) { return &AH{ctx: c}, nil }

// SetAddress implements provider.AHAddresser: everything of the address
// vector but the RoCE destination MAC, which Created adds.
func (a *AH) SetAddress(addr provider.AHAddress) error {
	at := addr.Attr
	if at.IsGlobal == 0 && addr.Ethernet {
		return fmt.Errorf("mlx5: a RoCE address needs a GRH: %w", errInvalid)
	}
	a.eth = addr.Ethernet
	a.av = [datagramSegSize]byte{}
	p := unsafe.Pointer(&a.av[0])
	rate := uint8(0)
	if int(at.StaticRate) < len(ibToMLX5Rate) {
		rate = ibToMLX5Rate[at.StaticRate]
	}
	grh := uint32(0)
	if addr.Ethernet {
		if addr.RoCEv2 {
			putBE16(unsafe.Add(p, avOffRlid), udpSport(at.GRH.FlowLabel))
		}
		a.av[avOffStatRateSL] = rate<<4 | (at.SL&0x7)<<1
	} else {
		a.av[avOffFlMlid] = at.SrcPathBits & 0x7f
		putBE16(unsafe.Add(p, avOffRlid), at.DLID)
		grh = 1
		a.av[avOffStatRateSL] = rate<<4 | at.SL&0xf
	}
	if at.IsGlobal != 0 {
		a.av[avOffTclass] = at.GRH.TrafficClass
		a.av[avOffHopLimit] = at.GRH.HopLimit
		putBE32(unsafe.Add(p, avOffGrhGidFl), grh<<30|uint32(at.GRH.SGIDIndex)<<20|at.GRH.FlowLabel&grhFlowLabelMask)
		copy(a.av[avOffRgid:], at.GRH.DGID[:])
	}
	return nil
}

// udpSport is the RoCE v2 UDP source port of a flow: derived from the
// flow label (ibv_flow_label_to_udp_sport), or random without one, as
// libmlx5 picks it.
func udpSport(flowLabel uint32) uint16 {
	fl := flowLabel & grhFlowLabelMask
	if fl != 0 {
		low, high := fl&0x3fff, fl&0xfc000
		low ^= high >> 14
		return uint16(low | roceUDPSportMin)
	}
	var b [2]byte
	rand.Read(b[:])
	return uint16(uint32(binary.LittleEndian.Uint16(b[:]))%(roceUDPSportMax+1-roceUDPSportMin) + roceUDPSportMin)
}

// CreateData implements provider.AH.
func (a *AH) CreateData() (in, out []byte) {
	return nil, unsafe.Slice((*byte)(unsafe.Pointer(&a.resp)), unsafe.Sizeof(a.resp))
}

// Created implements provider.AH: on RoCE the kernel resolved the
// destination MAC.
func (a *AH) Created(handle uint32) error {
	if a.eth {
		if a.resp.ResponseLength != 0 && a.resp.ResponseLength < uint32(unsafe.Offsetof(a.resp.Reserved)) {
			return fmt.Errorf("mlx5: CREATE_AH response of %d bytes has no destination MAC: %w", a.resp.ResponseLength, transport.ErrNotSupported)
		}
		copy(a.av[avOffRmac:avOffRmac+6], a.resp.DMAC[:])
	}
	return nil
}

// Destroyed implements provider.AH.
func (a *AH) Destroyed() { a.destroyed.Store(true) }

// AV returns the address vector UD WQEs carry (before the per-WQE
// destination QPN and Q_Key).
func (a *AH) AV() [48]byte { return a.av }
