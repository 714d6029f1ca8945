// Package cli holds what goverbs' commands need to stand in for the C
// tools of rdma-core: reading a command line the way glibc's getopt_long
// and strtol read it, and printing GIDs the way glibc's inet_ntop prints
// them, so that a command line or an output line means the same to both.
//
// cmd/ibinfo (ibv_devinfo) and cmd/ibpingpong (ibv_*_pingpong) share it. The
// reference data in testdata was recorded from glibc 2.36 (Debian 12), the
// C library the compared rdma-core runs on.
package cli
