package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
)

// machine describes where the benchmark ran, read at run time.
type machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"` // logical CPUs
	GOMAXPROCS int    `json:"gomaxprocs"`
	Kernel     string `json:"kernel"`
	OS         string `json:"os"`
	Go         string `json:"go"`
	Memory     string `json:"memory"`
	FS         string `json:"fs"`   // file system of the data directory
	Load       string `json:"load"` // load average (1, 5, 15 min) when read
}

func readMachine(dir string) machine {
	m := machine{
		CPU:        "unknown",
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
		Go:         runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if n := procFile("/proc/meminfo", "MemTotal:"); n > 0 {
		m.Memory = human(n)
	}
	m.Load = loadAvg()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		m.FS = fsName(int64(st.Type))
	}
	return m
}

func procFile(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return -1
}

func fsName(magic int64) string {
	switch magic {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794c7630:
		return "overlayfs"
	case 0x2FC12FC1:
		return "zfs"
	case 0x65735546:
		return "fuse"
	}
	return fmt.Sprintf("fs magic %#x", magic)
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
