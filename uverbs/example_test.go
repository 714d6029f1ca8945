package uverbs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// Open a device and print what ibv_devinfo would.
func ExampleOpen() {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	attr, err := dev.QueryDevice()
	if err != nil {
		log.Fatal(err)
	}
	port, err := dev.QueryPort(1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(attr.FWVer, attr.NodeGUID, attr.PhysPortCnt, port.State, port.ActiveMTU, port.LinkLayer)
}

// List the devices this program can open.
func ExampleDevices() {
	devs, err := uverbs.Devices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		fmt.Println(d.Name, d.NodeGUID)
	}
}

// Pick the GID RoCE traffic should use on port 1.
func ExampleContext_RecommendedGID() {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	g, err := dev.RecommendedGID(1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("use GID index %d (%v, %v)\n", g.Index, g.GID, g.Type)
}

// Register memory the garbage collector never moves or frees.
func ExamplePD_RegisterBuffer() {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	buf, err := uverbs.AllocBuffer(1 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close() // after the MR: a registered buffer refuses to close
	mr, err := pd.RegisterBuffer(buf, 0, buf.Len(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	fmt.Printf("lkey %#x rkey %#x\n", mr.Lkey(), mr.Rkey())
}

// Wait for completion events without tying up an OS thread.
func ExampleCompChannel_Wait() {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ch, err := dev.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	cq, err := dev.CreateCQ(256, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Close()
	if err := cq.RequestNotify(false); err != nil {
		log.Fatal(err)
	}
	wait, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if got, err := ch.Wait(wait); err == nil {
		got.AckEvents(1)
	}
}
