package sysfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/sysfs"
)

// TestBadInput is the bad-input table of the package's exported API, over
// the recorded 6.12 rxe tree: each row asserts the error (errors.Is) and
// that the message names what was wrong. Rows:
//
//	Device/empty name, Device/unknown, Device/parent directory, Device/path, Device/dot, Device/NUL
//	Uverbs/empty name, Uverbs/unknown, Uverbs/path
//	ReadGID/unknown device, ReadGID/port 0, ReadGID/port 2, ReadGID/negative port,
//	ReadGID/negative index, ReadGID/index past the table, ReadGID/empty slot
//	ReadPKey/unknown device, ReadPKey/port 2, ReadPKey/negative index, ReadPKey/index past the table
//	New/missing root, New/root without sysfs
//	Parse*/empty and Parse*/garbage for each of the ten parsers
func TestBadInput(t *testing.T) {
	f := sysfs.NewFS(loadTree(t, "rxe-6.12.txtar"))
	missing := sysfs.New(t.TempDir() + "/none")
	empty := sysfs.New(t.TempDir())
	type row struct {
		name  string
		want  error
		names string
		do    func() error
	}
	errOf := func(_ any, err error) error { return err }
	rows := []row{
		{"Device/empty name", sysfs.ErrNoDevice, `""`, func() error { return errOf(f.Device("")) }},
		{"Device/unknown", sysfs.ErrNoDevice, "nosuch0", func() error { return errOf(f.Device("nosuch0")) }},
		{"Device/parent directory", sysfs.ErrNoDevice, `".."`, func() error { return errOf(f.Device("..")) }},
		{"Device/path", sysfs.ErrNoDevice, "rxe0/ports", func() error { return errOf(f.Device("rxe0/ports")) }},
		{"Device/dot", sysfs.ErrNoDevice, `"."`, func() error { return errOf(f.Device(".")) }},
		{"Device/NUL", sysfs.ErrNoDevice, `rxe0\x00`, func() error { return errOf(f.Device("rxe0\x00")) }},
		{"Uverbs/empty name", sysfs.ErrNoDevice, `""`, func() error { return errOf(f.Uverbs("")) }},
		{"Uverbs/unknown", sysfs.ErrNoDevice, "nosuch0", func() error { return errOf(f.Uverbs("nosuch0")) }},
		{"Uverbs/path", sysfs.ErrNoDevice, "../rxe0", func() error { return errOf(f.Uverbs("../rxe0")) }},
		{"ReadGID/unknown device", fs.ErrNotExist, "nosuch0", func() error { return errOf(f.ReadGID("nosuch0", 1, 0)) }},
		{"ReadGID/port 0", fs.ErrNotExist, "ports/0", func() error { return errOf(f.ReadGID("rxe0", 0, 0)) }},
		{"ReadGID/port 2", fs.ErrNotExist, "ports/2", func() error { return errOf(f.ReadGID("rxe0", 2, 0)) }},
		{"ReadGID/negative port", fs.ErrInvalid, "negative", func() error { return errOf(f.ReadGID("rxe0", -1, 0)) }},
		{"ReadGID/negative index", fs.ErrInvalid, "GID -1", func() error { return errOf(f.ReadGID("rxe0", 1, -1)) }},
		{"ReadGID/index past the table", fs.ErrNotExist, "gids/100000", func() error { return errOf(f.ReadGID("rxe0", 1, 100000)) }},
		{"ReadGID/empty slot", sysfs.ErrGIDEmpty, "GID 2", func() error { return errOf(f.ReadGID("rxe0", 1, 2)) }},
		{"ReadPKey/unknown device", fs.ErrNotExist, "nosuch0", func() error { return errOf(f.ReadPKey("nosuch0", 1, 0)) }},
		{"ReadPKey/port 2", fs.ErrNotExist, "ports/2", func() error { return errOf(f.ReadPKey("rxe0", 2, 0)) }},
		{"ReadPKey/negative index", fs.ErrInvalid, "P_Key -1", func() error { return errOf(f.ReadPKey("rxe0", 1, -1)) }},
		{"ReadPKey/index past the table", fs.ErrNotExist, "pkeys/1000", func() error { return errOf(f.ReadPKey("rxe0", 1, 1000)) }},
		{"New/missing root", sysfs.ErrNoDevice, "rxe0", func() error { return errOf(missing.Device("rxe0")) }},
		{"New/root without sysfs", sysfs.ErrNoDevice, "rxe0", func() error { return errOf(empty.Device("rxe0")) }},
	}
	parsers := []struct {
		name  string
		parse func(string) error
	}{
		{"ParseDevNum", func(s string) error { return errOf(sysfs.ParseDevNum(s)) }},
		{"ParseGID", func(s string) error { return errOf(sysfs.ParseGID(s)) }},
		{"ParseGIDAttrType", func(s string) error { return errOf(sysfs.ParseGIDAttrType(s)) }},
		{"ParseGUID", func(s string) error { return errOf(sysfs.ParseGUID(s)) }},
		{"ParseLinkLayer", func(s string) error { return errOf(sysfs.ParseLinkLayer(s)) }},
		{"ParseNodeType", func(s string) error { return errOf(sysfs.ParseNodeType(s)) }},
		{"ParsePKey", func(s string) error { return errOf(sysfs.ParsePKey(s)) }},
		{"ParsePhysState", func(s string) error { return errOf(sysfs.ParsePhysState(s)) }},
		{"ParsePortState", func(s string) error { return errOf(sysfs.ParsePortState(s)) }},
		{"ParseRate", func(s string) error { return errOf(sysfs.ParseRate(s)) }},
	}
	for _, p := range parsers {
		rows = append(rows,
			row{p.name + "/empty", sysfs.ErrMalformed, `""`, func() error { return p.parse("") }},
			row{p.name + "/garbage", sysfs.ErrMalformed, "\\xff", func() error { return p.parse("\xff\x00 junk") }})
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				return r.do()
			}()
			switch {
			case err == nil:
				t.Errorf("accepted; want an error matching %v", r.want)
			case !errors.Is(err, r.want):
				t.Errorf("err = %v, does not match %v", err, r.want)
			case !strings.Contains(err.Error(), r.names):
				t.Errorf("err = %q, does not say %q", err, r.names)
			}
		})
	}
	t.Logf("%d rows", len(rows))
}
