package uverbs

import (
	"encoding/binary"
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// What two peers exchange out of band (over TCP, say) before RDMA: the
// Endpoint of each QP and the RemoteBuffer of each MR the peer may access.
// Both have a fixed binary form, the same on every machine, so that
//
//	msg, _ := local.MarshalBinary()        // send msg to the peer
//	err := peer.UnmarshalBinary(received)  // received: EndpointSize bytes
//
// is the whole exchange.

// Endpoint is what a peer needs to connect a QP to this one (QP.Connect's
// ConnectAttr.Remote), as the classic verbs examples and ibv_rc_pingpong
// exchange it.
type Endpoint struct {
	QPN uint32 // the QP's number (QP.QPN); 24 bits
	PSN uint32 // first packet sequence number this side sends; 24 bits
	LID uint16 // the port's LID (InfiniBand; 0 on RoCE)
	GID GID    // the port's GID (RoCE; InfiniBand with a GRH)
}

// EndpointSize is the length of an Endpoint's binary form:
//
//	bytes  0..3   QPN, big endian (the top 8 bits zero)
//	bytes  4..7   PSN, big endian (the top 8 bits zero)
//	bytes  8..9   LID, big endian
//	bytes 10..25  GID, as it is (network order)
const EndpointSize = 26

// AppendBinary appends the binary form of e (EndpointSize bytes) to b.
func (e Endpoint) AppendBinary(b []byte) ([]byte, error) {
	if e.QPN > 0xffffff || e.PSN > 0xffffff {
		return b, fmt.Errorf("uverbs: Endpoint: QPN %#x or PSN %#x is wider than 24 bits: %w", e.QPN, e.PSN, unix.EINVAL)
	}
	b = binary.BigEndian.AppendUint32(b, e.QPN)
	b = binary.BigEndian.AppendUint32(b, e.PSN)
	b = binary.BigEndian.AppendUint16(b, e.LID)
	return append(b, e.GID[:]...), nil
}

// MarshalBinary returns the binary form of e (EndpointSize bytes).
func (e Endpoint) MarshalBinary() ([]byte, error) {
	return e.AppendBinary(make([]byte, 0, EndpointSize))
}

// UnmarshalBinary sets e from its binary form: exactly EndpointSize bytes
// with QPN and PSN within 24 bits.
func (e *Endpoint) UnmarshalBinary(b []byte) error {
	if len(b) != EndpointSize {
		return fmt.Errorf("uverbs: Endpoint: %d bytes, want %d: %w", len(b), EndpointSize, unix.EINVAL)
	}
	qpn, psn := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	if qpn > 0xffffff {
		return fmt.Errorf("uverbs: Endpoint: QPN %#x is wider than 24 bits: %w", qpn, unix.EINVAL)
	}
	if psn > 0xffffff {
		return fmt.Errorf("uverbs: Endpoint: PSN %#x is wider than 24 bits: %w", psn, unix.EINVAL)
	}
	*e = Endpoint{QPN: qpn, PSN: psn, LID: binary.BigEndian.Uint16(b[8:]), GID: GID(b[10:26])}
	return nil
}

// RemoteBuffer is memory of the peer that RDMA reads, writes and atomics
// may access: what MR.RemoteBuffer gives the peer. Addr is in the peer
// MR's address space (its IOVA).
type RemoteBuffer struct {
	Addr   uint64 // the first byte, as SendWR.RemoteAddr names it
	Rkey   uint32 // SendWR.Rkey
	Length uint64 // bytes from Addr the peer allows
}

// RemoteBufferSize is the length of a RemoteBuffer's binary form:
//
//	bytes  0..7   Addr, big endian
//	bytes  8..11  Rkey, big endian
//	bytes 12..19  Length, big endian (Addr+Length does not wrap)
const RemoteBufferSize = 20

// AppendBinary appends the binary form of r (RemoteBufferSize bytes) to b.
func (r RemoteBuffer) AppendBinary(b []byte) ([]byte, error) {
	if r.Length > math.MaxUint64-r.Addr {
		return b, fmt.Errorf("uverbs: RemoteBuffer: Addr %#x + Length %d wraps: %w", r.Addr, r.Length, unix.EINVAL)
	}
	b = binary.BigEndian.AppendUint64(b, r.Addr)
	b = binary.BigEndian.AppendUint32(b, r.Rkey)
	return binary.BigEndian.AppendUint64(b, r.Length), nil
}

// MarshalBinary returns the binary form of r (RemoteBufferSize bytes).
func (r RemoteBuffer) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, RemoteBufferSize))
}

// UnmarshalBinary sets r from its binary form: exactly RemoteBufferSize
// bytes, Addr+Length not wrapping.
func (r *RemoteBuffer) UnmarshalBinary(b []byte) error {
	if len(b) != RemoteBufferSize {
		return fmt.Errorf("uverbs: RemoteBuffer: %d bytes, want %d: %w", len(b), RemoteBufferSize, unix.EINVAL)
	}
	v := RemoteBuffer{Addr: binary.BigEndian.Uint64(b), Rkey: binary.BigEndian.Uint32(b[8:]), Length: binary.BigEndian.Uint64(b[12:])}
	if v.Length > math.MaxUint64-v.Addr {
		return fmt.Errorf("uverbs: RemoteBuffer: Addr %#x + Length %d wraps: %w", v.Addr, v.Length, unix.EINVAL)
	}
	*r = v
	return nil
}

// Slice returns the n bytes of r from offset off, or an error when they
// are not all inside r.
func (r RemoteBuffer) Slice(off, n uint64) (RemoteBuffer, error) {
	if off > r.Length || n > r.Length-off {
		return RemoteBuffer{}, fmt.Errorf("uverbs: RemoteBuffer.Slice(%d, %d): outside the %d-byte buffer: %w", off, n, r.Length, unix.EINVAL)
	}
	return RemoteBuffer{Addr: r.Addr + off, Rkey: r.Rkey, Length: n}, nil
}

// SGE returns the scatter/gather element for length bytes of the MR from
// offset off (its address in the MR's IOVA space, as the device checks
// it), or an error when they are not all inside the MR or length does not
// fit an SGE.
func (mr *MR) SGE(off, length int) (SGE, error) {
	if err := mr.bounds("SGE", off, length); err != nil {
		return SGE{}, err
	}
	if uint64(length) > math.MaxUint32 {
		return SGE{}, fmt.Errorf("uverbs: MR.SGE: length %d is beyond an SGE's 32 bits: %w", length, unix.EINVAL)
	}
	return SGE{Addr: mr.iova + uint64(off), Length: uint32(length), Lkey: mr.lkey}, nil
}

// RemoteBuffer returns what a peer needs to access length bytes of the MR
// from offset off with RDMA (the MR must grant the peer's operations:
// AccessRemoteWrite, AccessRemoteRead, AccessRemoteAtomic), or an error
// when they are not all inside the MR.
func (mr *MR) RemoteBuffer(off, length int) (RemoteBuffer, error) {
	if err := mr.bounds("RemoteBuffer", off, length); err != nil {
		return RemoteBuffer{}, err
	}
	return RemoteBuffer{Addr: mr.iova + uint64(off), Rkey: mr.rkey, Length: uint64(length)}, nil
}

func (mr *MR) bounds(verb string, off, length int) error {
	if mr == nil {
		return fmt.Errorf("uverbs: MR.%s: nil MR: %w", verb, unix.EINVAL)
	}
	if off < 0 || length < 0 || off > len(mr.mem) || length > len(mr.mem)-off {
		return fmt.Errorf("uverbs: MR.%s(%d, %d): outside the %d-byte MR: %w", verb, off, length, len(mr.mem), unix.EINVAL)
	}
	return nil
}
