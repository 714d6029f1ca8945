package rdmanl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/goverbs/goverbs/rdmanl"
)

// List the devices and their ports, as rdma dev and rdma link do.
func ExampleConn_Devices() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := rdmanl.Dial()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	devs, err := c.Devices(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		ports, err := c.Ports(ctx, d.Index)
		if err != nil {
			log.Fatal(err)
		}
		for _, p := range ports {
			fmt.Printf("%s/%d %s %s netdev %s (driver %s, node GUID %s)\n", d.Name, p.Port, p.State, p.PhysState, p.Netdev, d.Driver, d.NodeGUID)
		}
	}
}

// Create an rxe device on a network device, and remove it again.
func ExampleConn_AddLink() {
	ctx := context.Background()
	c, err := rdmanl.Dial()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	err = c.AddLink(ctx, "rxe9", rdmanl.LinkRXE, "eth0")
	switch {
	case errors.Is(err, rdmanl.ErrNetdevNotFound):
		log.Fatal("no eth0 here")
	case errors.Is(err, rdmanl.ErrLinkTypeUnavailable):
		log.Fatal("load rdma_rxe first")
	case err != nil:
		log.Fatal(err)
	}
	if err := c.DeleteLink(ctx, "rxe9"); err != nil {
		log.Fatal(err)
	}
}

// Print every port's counters and the QPs with their owners as JSON, the
// same JSON rdma -j statistic and rdma -j res show qp print.
func ExampleConn_AllPortCounters() {
	ctx := context.Background()
	c, err := rdmanl.Dial()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	counters, err := c.AllPortCounters(ctx)
	if err != nil {
		log.Fatal(err)
	}
	qps, err := c.QPs(ctx, rdmanl.AllDevices)
	if err != nil {
		log.Fatal(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.Encode(counters)
	enc.Encode(qps)
}

// Follow devices coming, going and being renamed.
func ExampleWatch() {
	w, err := rdmanl.Watch()
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		e, err := w.Next(ctx)
		if err != nil {
			return // the minute is over, or events were lost: list again
		}
		fmt.Println(e.Kind, e.Name, e.OldName)
	}
}
