package uverbs

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
)

func TestProviderChoice(t *testing.T) {
	// A driver goverbs knows a provider for, pretend it is not linked in.
	provider.Known[abi.DriverEFA] = struct{ Name, Import string }{"efa", "github.com/goverbs/goverbs/provider/efa"}
	defer delete(provider.Known, abi.DriverEFA)
	for _, tc := range []struct {
		name    string
		dev     deviceInfo
		want    string // provider name, or a substring of the error
		wantErr bool
	}{
		{"driver id", deviceInfo{name: "weird0", driver: abi.DriverRXE}, "rxe", false},
		{"name fallback", deviceInfo{name: "rxe7"}, "rxe", false},
		{"mlx5 by id", deviceInfo{name: "mlx5_0", driver: abi.DriverMLX5}, "mlx5", false},
		{"not linked in", deviceInfo{name: "efa0", driver: abi.DriverEFA}, `import _ "github.com/goverbs/goverbs/provider/efa"`, true},
		{"no provider", deviceInfo{name: "siw0", driver: abi.DriverSIW}, "no provider for the siw driver", true},
		{"unknown name", deviceInfo{name: "nic0"}, "no goverbs provider recognises", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.dev.provider()
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want one saying %q", err, tc.want)
				}
				return
			}
			if err != nil || p.Name() != tc.want {
				t.Fatalf("provider = %v, %v; want %s", p, err, tc.want)
			}
		})
	}
	if _, err := (deviceInfo{name: "siw0", driver: abi.DriverSIW}).provider(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("a driver without a provider: %v, want ErrNotSupported", err)
	}
}

// FuzzDeviceAttr feeds arbitrary (truncated, oversized, nonsense) extended
// query-device responses to the decoder: it must never panic, and must read
// only what response_length covers.
func FuzzDeviceAttr(f *testing.F) {
	f.Add(make([]byte, int(unsafe.Sizeof(abi.ExQueryDeviceResp{}))), uint32(304))
	f.Add([]byte{1, 2, 3}, uint32(0xffffffff))
	f.Add([]byte{}, uint32(180))
	p, _ := provider.Lookup(abi.DriverRXE)
	pctx, err := p.NewContext(provider.Device{Name: "rxe0"})
	if err != nil {
		f.Fatal(err)
	}
	c := &Context{pctx: pctx, dev: deviceInfo{ports: []int{1}}}
	f.Fuzz(func(t *testing.T, raw []byte, respLen uint32) {
		var r abi.ExQueryDeviceResp
		copy(asBytes(&r), raw)
		r.ResponseLength = respLen
		a := c.deviceAttr(&r, true)
		if respLen < uint32(unsafe.Offsetof(r.ODPCaps)+unsafe.Sizeof(r.ODPCaps)) && a.ODPCaps.General != 0 {
			t.Errorf("ODP caps read from a %d-byte response", respLen)
		}
		if a.PhysPortCntEx != 1 {
			t.Errorf("phys_port_cnt_ex %d, want the sysfs count 1", a.PhysPortCntEx)
		}
	})
}
