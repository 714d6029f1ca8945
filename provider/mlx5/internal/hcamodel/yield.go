package hcamodel

import "runtime"

func yield() { runtime.Gosched() }
