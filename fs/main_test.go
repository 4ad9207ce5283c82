package fs_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// childEnv selects what the test binary does when a test re-executes it as
// another process.
const childEnv = "DLQDUMP_FS_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "claim-holder":
		os.Exit(claimHolder())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, os.Getenv(childEnv))
		os.Exit(2)
	}
}

// claimHolder claims DLQDUMP_FS_SEGMENT in DLQDUMP_FS_DIR for the lease
// DLQDUMP_FS_LEASE as owner "child", says "claimed", then renews every quarter
// lease with a growing checkpoint, saying "renewed N" each time, until killed.
func claimHolder() int {
	ctx := context.Background()
	lease, err := time.ParseDuration(os.Getenv("DLQDUMP_FS_LEASE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rd := &fs.Reader{Directory: os.Getenv("DLQDUMP_FS_DIR")}
	c, err := rd.Claim(ctx, os.Getenv("DLQDUMP_FS_SEGMENT"), "child", lease)
	if err != nil {
		fmt.Fprintln(os.Stderr, "claim:", err)
		return 1
	}
	fmt.Println("claimed")
	for i := uint64(1); ; i++ {
		time.Sleep(lease / 4)
		cp := dlqdump.Checkpoint{Position: segment.Position{Offset: segment.HeaderSize, Seq: i}, Delivered: i}
		if err := c.Renew(ctx, cp); err != nil {
			fmt.Fprintln(os.Stderr, "renew:", err)
			return 1
		}
		fmt.Printf("renewed %d\n", i)
	}
}
