package main

import "net"

// interfaceName is the name of the network interface with the index, or ""
// when there is none.
var interfaceName = func(ifindex uint32) string {
	ifi, err := net.InterfaceByIndex(int(ifindex))
	if err != nil {
		return ""
	}
	return ifi.Name
}

func newRealSystem() system { return nil }
