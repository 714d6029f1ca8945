//go:build !amd64

package main

import "time"

var clockStart = time.Now()

// cycles is the monotonic clock in nanoseconds where there is no
// time-stamp counter to read.
func cycles() uint64 { return uint64(time.Since(clockStart)) }
