package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValue(t *testing.T) {
	lat := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 2       1000          30.50          200.25       33.50    \t       35.00       \t4.20   \t\t60.00   \t\t190.00 \n"
	bw := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 65536      5000             70.12              65.50  \t\t   0.001048\n"
	for _, tc := range []struct {
		metric, out string
		want        float64
	}{{"lat", lat, 33.5}, {"bw", bw, 65.5}, {"rate", bw, 0.001048}} {
		got, err := value(tc.metric, tc.out)
		if err != nil || got != tc.want {
			t.Errorf("value(%s) = %v, %v; want %v", tc.metric, got, err, tc.want)
		}
	}
	nan := strings.Replace(lat, "4.20   ", "-nan   ", 1)
	if got, err := value("lat", nan); err != nil || got != 33.5 {
		t.Errorf("row with a -nan deviation: %v, %v", got, err)
	}
	if _, err := value("lat", bw); err == nil {
		t.Error("a bandwidth row read as latency")
	}
}

func TestSummarize(t *testing.T) {
	ms := []measurement{
		{Case: "write_lat 2B", Tool: "go-c", OK: true},
		{Case: "write_lat 2B", Tool: "c-go", OK: false, Detail: "boom"},
		{Case: "write_lat 2B", Tool: "go", Rep: 1, Value: 10, OK: true},
		{Case: "write_lat 2B", Tool: "go", Rep: 2, Value: 30, OK: true},
		{Case: "write_lat 2B", Tool: "go", Rep: 3, Value: 20, OK: true},
		{Case: "write_lat 2B", Tool: "c", Rep: 1, Value: 40, OK: true},
		{Case: "write_lat 2B", Tool: "c", Rep: 2, Value: 40, OK: true},
	}
	rows := summarize(ms)
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	got := []any{r.GoMed, r.CMed, r.Ratio, r.GoN, r.CN, r.Interop, len(r.Failures), r.GoMin, r.GoMax}
	want := []any{20.0, 40.0, 0.5, 3, 2, "FAIL c-go", 1, 10.0, 30.0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
