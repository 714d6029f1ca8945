// Command ibinfo prints the attributes of the RDMA devices, a drop-in for
// rdma-core's ibv_devinfo that needs no libibverbs and no provider
// libraries.
//
// With ibv_devinfo's options (-d/--ib-dev, -i/--ib-port, -l/--list,
// -v/--verbose) its standard output and exit status are byte for byte those
// of rdma-core v44.0's ibv_devinfo on the same device, quirks included.
// Beyond that:
//
//	-h, --help     print the usage and exit 0
//	--json, -json  print the devices as JSON: every attribute, the GID table
//	               with types and network devices, the uverbs character
//	               device, and the recommended RoCE GID of each port
//
// When no device can be used, ibinfo says why on standard error: the RDMA
// modules are not loaded, a device has no uverbs character device, the
// character device cannot be opened, or goverbs has no provider for it.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/goverbs/goverbs/internal/cli"
)

// environment is what run needs from the world outside its arguments.
type environment struct {
	sys system
}

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr, environment{sys: newRealSystem()}))
}

// ibvDevinfoSpec is ibv_devinfo's option table, getopt_long("d:i:lv"),
// with ibinfo's additions (-h, --help, --json, -json): each was an error
// in ibv_devinfo, so no valid ibv_devinfo command line changes meaning.
var ibvDevinfoSpec = cli.Spec{
	Short: "d:i:lvh",
	Long: []cli.LongOption{
		{Name: "ib-dev", Arg: cli.RequiredArgument, Val: 'd'},
		{Name: "ib-port", Arg: cli.RequiredArgument, Val: 'i'},
		{Name: "list", Arg: cli.NoArgument, Val: 'l'},
		{Name: "verbose", Arg: cli.NoArgument, Val: 'v'},
		{Name: "help", Arg: cli.NoArgument, Val: 'h'},
		{Name: "json", Arg: cli.NoArgument, Val: 'j'},
	},
	SingleDash: []string{"json"},
}

// options are the parsed command line.
type options struct {
	devName string // "" with devSet false: every device
	devSet  bool
	port    uint8 // 0: every port
	verbose bool
	list    bool
	json    bool
}

// exitUsage and exitFail are ibv_devinfo's exit statuses for a bad port
// number and for everything else that stops it before any device (-1).
const (
	exitUsage = 1
	exitFail  = 255
)

// run is ibinfo: args[0] is the program name as ibv_devinfo prints it in
// its usage and getopt messages.
func run(args []string, stdout, stderr io.Writer, env environment) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if len(args) == 0 {
		args = []string{"ibinfo"}
	}
	// Operands are ignored, as ibv_devinfo ignores them.
	events, _ := cli.GetoptLong(args, ibvDevinfoSpec)
	jsonMode := false
	for _, ev := range events {
		if ev.Opt == 'j' {
			jsonMode = true
		}
	}
	var o options
	o.json = jsonMode
	// ibv_devinfo acts on each option as getopt returns it: a bad port
	// number or a getopt error stops it there, and -l lists the devices at
	// once, before later options are parsed. JSON mode reads every option
	// first, so -l may come before --json.
	for _, ev := range events {
		switch ev.Opt {
		case 0:
			fmt.Fprintln(stderr, getoptMessage(args[0], ev.Err))
			usage(out, args[0])
			return exitFail
		case 'd':
			o.devName, o.devSet = ev.Arg, true
		case 'i':
			// strtol(optarg, NULL, 0) into an int, then passed on as a
			// uint8: "-i 256" means every port, as in ibv_devinfo.
			p := int32(cli.Strtol(ev.Arg))
			if p <= 0 {
				usage(out, args[0])
				return exitUsage
			}
			o.port = uint8(p)
		case 'v':
			o.verbose = true
		case 'h':
			usage(out, args[0])
			usageExtra(out)
			return 0
		case 'j':
		case 'l':
			if !jsonMode {
				return listDevices(out, stderr, env.sys)
			}
			o.list = true
		}
	}
	if jsonMode {
		return runJSON(out, stderr, env.sys, o)
	}
	return runDevinfo(out, stderr, env.sys, o)
}

// getoptMessage is what glibc's getopt prints on stderr for err: the
// message after the program name.
func getoptMessage(prog string, err error) string {
	return prog + ": " + err.Error()
}

func usage(w io.Writer, prog string) {
	fmt.Fprintf(w, "Usage: %s             print the ca attributes\n", prog)
	fmt.Fprintf(w, "\n")
	fmt.Fprintf(w, "Options:\n")
	fmt.Fprintf(w, "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n")
	fmt.Fprintf(w, "  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n")
	fmt.Fprintf(w, "  -l, --list             print only the IB devices names\n")
	fmt.Fprintf(w, "  -v, --verbose          print all the attributes of the IB device(s)\n")
}

// usageExtra documents ibinfo's additions; only -h prints it, so the usage
// that errors print stays ibv_devinfo's.
func usageExtra(w io.Writer) {
	fmt.Fprintf(w, "  -h, --help             print this help\n")
	fmt.Fprintf(w, "      --json             print the attributes, GID tables and recommended RoCE GIDs as JSON\n")
}

// listDevices is ibv_devinfo -l.
func listDevices(out, stderr io.Writer, sys system) int {
	devs, skipped, err := sys.Devices()
	if err != nil {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %v\n", listErrText(err))
		explain(stderr, nil, skipped, err)
		return exitFail
	}
	plural := "s"
	if len(devs) == 1 {
		plural = ""
	}
	fmt.Fprintf(out, "%d HCA%s found:\n", len(devs), plural)
	for _, d := range devs {
		fmt.Fprintf(out, "\t%s\n", d.name)
	}
	fmt.Fprintf(out, "\n")
	if len(devs) == 0 {
		explain(stderr, nil, skipped, nil)
	}
	return 0
}

// runDevinfo is ibv_devinfo without -l.
func runDevinfo(out, stderr io.Writer, sys system, o options) int {
	devs, skipped, err := sys.Devices()
	if err != nil {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %v\n", listErrText(err))
		explain(stderr, nil, skipped, err)
		return exitFail
	}
	ret := 0
	if o.devSet {
		h, ok := findHCA(devs, o.devName)
		if !ok {
			fmt.Fprintf(stderr, "IB device '%s' wasn't found\n", o.devName)
			explain(stderr, &o.devName, skipped, nil)
			return exitFail
		}
		ret |= printHCA(out, stderr, sys, h, o.port, o.verbose)
	} else {
		if len(devs) == 0 {
			fmt.Fprintf(stderr, "No IB devices found\n")
			explain(stderr, nil, skipped, nil)
			return exitFail
		}
		for _, h := range devs {
			ret |= printHCA(out, stderr, sys, h, o.port, o.verbose)
		}
	}
	// main's int return becomes the exit status modulo 256.
	return ret & 0xff
}

func findHCA(devs []hca, name string) (hca, bool) {
	for _, h := range devs {
		if h.name == name {
			return h, true
		}
	}
	return hca{}, false
}

// listErrText is the perror text of a failed device list: the errno's
// message where there is one.
func listErrText(err error) string {
	var le *listError
	if errors.As(err, &le) {
		return le.perror
	}
	return err.Error()
}

// listError is a device list that could not be had. perror is what
// ibv_devinfo's perror would print after the colon.
type listError struct {
	perror string
	err    error
}

func (e *listError) Error() string { return e.err.Error() }
func (e *listError) Unwrap() error { return e.err }
