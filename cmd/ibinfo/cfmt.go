package main

import "strings"

// C conversions that ibv_devinfo's output depends on, reproduced exactly;
// those cmd/ibpingpong needs too are in internal/cli.

// cString is what C's "%s" prints of a char buffer: everything before the
// first NUL.
func cString(b []byte) string {
	if k := strings.IndexByte(string(b), 0); k >= 0 {
		return string(b[:k])
	}
	return string(b)
}
