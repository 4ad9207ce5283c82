//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal and returns its master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100}); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestProgress checks that progress bars are drawn when stderr is a
// terminal, and never into a pipe.
func TestProgress(t *testing.T) {
	dir := makeSample(t)
	// A pipe: no bar.
	r := cli(t, 0, "cp", dir, t.TempDir())
	if strings.Contains(r.stderr, "\r") || strings.Contains(r.stderr, "copying") {
		t.Errorf("progress drawn into a pipe: %q", r.stderr)
	}
	// A terminal: a bar, erased at the end.
	for _, args := range [][]string{{"cp", dir, t.TempDir()}, {"verify", dir}, {"restore", makeSample(t)}} {
		master, slave := openPTY(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = append(baseEnv(), "TERM=xterm")
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, slave
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		out := make(chan []byte)
		go func() {
			var b bytes.Buffer
			buf := make([]byte, 4096)
			for {
				n, err := master.Read(buf)
				b.Write(buf[:n])
				if err != nil {
					out <- b.Bytes()
					return
				}
			}
		}()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		tty := string(<-out)
		master.Close()
		cancel()
		label := map[string]string{"cp": "copying", "verify": "verifying", "restore": "restoring"}[args[0]]
		i := strings.LastIndex(tty, "\r\033[K"+label)
		if i < 0 || !strings.Contains(tty[i+1:], "\r\033[K") || !strings.Contains(tty, "] ") {
			t.Errorf("%s: no progress bar, or not erased, on the terminal: %q", args[0], tty)
		}
		if strings.Contains(stdout.String(), "\r") {
			t.Errorf("%s: progress on stdout: %q", args[0], stdout.String())
		}
		// --quiet: no bar.
		master, slave = openPTY(t)
		cmd = exec.Command(binary, append(args, "--quiet")...)
		switch args[0] {
		case "cp":
			cmd = exec.Command(binary, "cp", dir, t.TempDir(), "--quiet")
		case "restore":
			cmd = exec.Command(binary, "restore", makeSample(t), "--quiet")
		}
		cmd.Env = append(baseEnv(), "TERM=xterm")
		cmd.Stderr = slave
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		master.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 4096)
		n, _ := master.Read(b)
		master.Close()
		if n > 0 {
			t.Errorf("%s --quiet wrote to the terminal: %q", args[0], b[:n])
		}
	}
}
