package uverbs

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/transport"
)

// The transcripts in testdata/transcripts were recorded on the real kernels
// in the test VM (make transcripts). Each is the command stream of
// scenario() on one kernel through one transport, plus what the scenario
// saw; the unit test replays the stream, checking every byte goverbs sends,
// and compares the results.

var record = flag.Bool("record", false, "run the transcript scenario on the device and print the transcript (test VM only)")

// scenarioResult is what the scenario observed.
type scenarioResult struct {
	Device     deviceRecord
	Attr       DeviceAttr
	Port       PortAttr
	GID1       GIDEntry
	EmptyGID   string
	BadPort    string
	Table      []GIDEntry
	NumCompVec int
}

// deviceRecord is what Open found in sysfs and netlink, for replay.
type deviceRecord struct {
	Name       string
	ABIVersion int
	Driver     uint32
	Ports      []int
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// scenario drives every verb of the read-only half once.
func scenario(c *Context) (scenarioResult, error) {
	r := scenarioResult{
		Device:     deviceRecord{Name: c.dev.name, ABIVersion: c.dev.abiVersion, Driver: uint32(c.prov.DriverID()), Ports: c.dev.ports},
		NumCompVec: c.NumCompVectors(),
	}
	var err error
	if r.Attr, err = c.QueryDevice(); err != nil {
		return r, err
	}
	if r.Port, err = c.QueryPort(1); err != nil {
		return r, err
	}
	_, err = c.QueryPort(2)
	r.BadPort = errText(err)
	if c.Transport() != TransportWrite {
		// The GID queries of the write transport read sysfs, which a
		// transcript does not hold.
		if r.GID1, err = c.QueryGID(1, 1); err != nil {
			return r, err
		}
		_, err = c.QueryGID(1, int(r.Port.GIDTblLen)-1)
		r.EmptyGID = errText(err)
		if r.Table, err = c.QueryGIDTable(); err != nil {
			return r, err
		}
	}
	return r, nil
}

const (
	transcriptBegin = "=== goverbs transcript begin"
	transcriptEnd   = "=== goverbs transcript end"
)

// TestRecordTranscript prints the scenario's transcript for one transport
// (GOVERBS_TRANSPORT) when run with -record in the test VM.
func TestRecordTranscript(t *testing.T) {
	if !*record {
		t.Skip("run with -record in the test VM to record transcripts (make transcripts)")
	}
	name := vmenv.RequireRXE(t)
	mode, err := transport.ModeFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	rec := &transport.Recorder{Kernel: transport.System{}}
	c, err := Open(name, WithTransport(mode), withKernel(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := scenario(c)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s %s-%s\n", transcriptBegin, vmenv.KernelName(), mode)
	b, _ := json.Marshal(res)
	fmt.Fprintf(&buf, "%s\n", b)
	rec.WriteTo(&buf)
	fmt.Fprintf(&buf, "%s\n", transcriptEnd)
	os.Stdout.Write(buf.Bytes())
}

func TestReplayTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/transcripts/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata/transcripts (make transcripts records them)")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".jsonl"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, rest, _ := bytes.Cut(data, []byte("\n"))
			var want scenarioResult
			if err := json.Unmarshal(first, &want); err != nil {
				t.Fatal(err)
			}
			xs, err := transport.ReadTranscript(bytes.NewReader(rest))
			if err != nil {
				t.Fatal(err)
			}
			base := strings.TrimSuffix(filepath.Base(f), ".jsonl")
			mode, err := transport.ParseMode(base[strings.LastIndex(base, "-")+1:])
			if err != nil {
				t.Fatal(err)
			}
			replay := transport.NewReplay(xs)
			dev := deviceInfo{
				name: want.Device.Name, charDev: "/dev/null", abiVersion: want.Device.ABIVersion,
				driver: abi.DriverID(want.Device.Driver), ports: want.Device.Ports,
			}
			c, err := openDevice(dev, &options{transport: mode, kernel: replay})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := scenario(c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("scenario results (-recorded +replayed):\n%s", diff)
			}
			if n := replay.Remaining(); n != 0 {
				t.Errorf("%d recorded commands were not sent", n)
			}
		})
	}
}

// TestReplayDetectsChangedBytes proves the replay is strict: a command
// that differs by one byte from the recording fails.
func TestReplayDetectsChangedBytes(t *testing.T) {
	files, _ := filepath.Glob("testdata/transcripts/*-ioctl.jsonl")
	if len(files) == 0 {
		t.Skip("no ioctl transcript recorded")
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := bytes.Cut(data, []byte("\n"))
	xs, err := transport.ReadTranscript(bytes.NewReader(rest))
	if err != nil {
		t.Fatal(err)
	}
	// Make the recorded GET_CONTEXT expect another driver id.
	xs[0].Driver++
	dev := deviceInfo{name: "rxe0", charDev: "/dev/null", abiVersion: 2, driver: abi.DriverRXE, ports: []int{1}}
	_, err = openDevice(dev, &options{transport: TransportIoctl, kernel: transport.NewReplay(xs)})
	if err == nil || !strings.Contains(err.Error(), "replay") {
		t.Fatalf("open against a changed transcript: %v, want a replay mismatch", err)
	}
	var e *Error
	if errors.As(err, &e) {
		t.Errorf("mismatch reported as a kernel error: %v", err)
	}
}
