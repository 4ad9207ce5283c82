package jobs_test

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/internal/jobsim"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

func TestMain(m *testing.M) {
	if jobsim.IsChild() {
		os.Exit(jobsim.ChildMain())
	}
	os.Exit(m.Run())
}

// seedJobs is how many jobs TestJobsSeed002 runs: DLQDUMP_SEED_JOBS, or a
// sample that keeps the test short.
func seedJobs(sample int) int {
	if n, err := strconv.Atoi(os.Getenv("DLQDUMP_SEED_JOBS")); err == nil && n > 0 {
		return n
	}
	return sample
}

// seedLead is DLQDUMP_SEED_LEAD, or zero: jobsim's default.
func seedLead() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("DLQDUMP_SEED_LEAD"))
	return d
}

// Seed 002's test (package jobsim), on a sample: one-off jobs due over a
// span, on a directory and on versitygw, 4 runner processes, 2 of them
// killed (SIGKILL) and restarted meanwhile: every job completes once, none
// starts before its second, every record is delivered once (a block twice
// at most per kill). cmd/dlqdump-reliability runs 10,000 jobs over 60 s;
// DLQDUMP_SEED_JOBS=10000 here does too. It reports the runner processes'
// CPU time per job (and versitygw's); DLQDUMP_SEED_CPUPROFILE=DIR has each
// runner that exits on SIGTERM write its CPU profile there, and
// DLQDUMP_SEED_LEAD=90s gives creating the jobs that long before the first
// is due (on a machine so loaded that the default, 3 s and 3 ms a job, is
// too short, which fails the run).
func TestJobsSeed002(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs runner processes for half a minute")
	}
	for _, store := range []string{"dir", "versitygw"} {
		t.Run(store, func(t *testing.T) {
			st := drainers.Store{Dir: t.TempDir()}
			n := seedJobs(400)
			if store == "versitygw" {
				srv, stop, err := s3test.Versity(nil)
				if err != nil {
					t.Skip(err)
				}
				t.Cleanup(stop)
				st = drainers.Store{S3: srv, Prefix: s3test.UniquePrefix("jobs")}
				n = seedJobs(200)
			}
			span := time.Duration(n) * 60 * time.Second / 10000
			res, err := jobsim.Run(t.Context(), jobsim.Options{Store: st, Jobs: n, Records: 5, Span: max(span, 8*time.Second),
				Runners: 4, Restorers: 4, Kills: 2, Lease: time.Second, Grace: 4 * time.Minute,
				Child:   func() *exec.Cmd { return exec.Command(os.Args[0], "-test.run=^$") },
				Profile: os.Getenv("DLQDUMP_SEED_CPUPROFILE"), Lead: seedLead()})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", store, res)
			if !res.OK() {
				t.Fatalf("%s: %s; %v", store, res, res.Problems)
			}
		})
	}
}
