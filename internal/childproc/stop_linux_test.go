package childproc_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/dlqdump/dlqdump/internal/childproc"
)

// stopChild is the process TestStopSelfStopsTheCaller starts: a goroutine on
// a thread other than the main one (which the kernel picks to take a signal
// to the process) stops the process and then creates the file
// DLQDUMP_STOP_MARK.
func stopChild() {
	runtime.LockOSThread() // the main goroutine keeps the main thread
	done := make(chan struct{})
	go func() {
		childproc.StopSelf()
		f, err := os.Create(os.Getenv("DLQDUMP_STOP_MARK"))
		if err == nil {
			f.Close()
		}
		close(done)
	}()
	<-done
	os.Exit(0)
}

func TestMain(m *testing.M) {
	if os.Getenv("DLQDUMP_STOP_MARK") != "" {
		stopChild()
	}
	os.Exit(m.Run())
}

// StopSelf returns only once the process is continued: whenever the parent
// sees it stopped, the caller has not gone on. With kill(2) of its own
// process, the calling thread went on and made its file before the process
// stopped, in the first run of each of 3 tries on a loaded 2-core machine
// (issue 30: a record writer stopped that way wrote its record).
func TestStopSelfStopsTheCaller(t *testing.T) {
	for i := range 10 {
		mark := filepath.Join(t.TempDir(), "went-on")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "DLQDUMP_STOP_MARK="+mark)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WUNTRACED, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if !ws.Stopped() {
			t.Fatalf("run %d: the child did not stop: %v", i, ws)
		}
		_, err := os.Stat(mark)
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Wait()
		if err == nil {
			t.Fatalf("run %d: the caller of StopSelf went on before the process stopped", i)
		}
		if _, err := os.Stat(mark); err != nil {
			t.Fatalf("run %d: continued, the caller did not go on: %v", i, err)
		}
	}
}
