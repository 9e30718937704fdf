package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSelf is this process's user plus system CPU time (getrusage
// RUSAGE_SELF): every thread of the harness, i.e. the client under test.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuOf returns the user plus system CPU time of another process (a
// server) from /proc/<pid>/stat, at USER_HZ resolution; ok is false when it
// cannot be read.
func cpuOf(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing one.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// cpuTimes are the machine-wide counters of /proc/stat's "cpu" line, in
// USER_HZ ticks: total and steal.
type cpuTimes struct{ total, steal uint64 }

func readCPUTimes() (cpuTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var t cpuTimes
	// user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is already counted in user.
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		t.total += v
		if i == 8 {
			t.steal = v
		}
	}
	return t, true
}

// stealPercent is the share of machine time stolen by the hypervisor
// between a and b.
func stealPercent(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return 100 * float64(b.steal-a.steal) / float64(b.total-a.total)
}

// ioCounts are this process's read and write system calls so far
// (/proc/self/io syscr and syscw): every read(2) and write(2) on a socket,
// whatever the client.
type ioCounts struct{ reads, writes uint64 }

func readIOCounts() (ioCounts, bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return ioCounts{}, false
	}
	var c ioCounts
	var okR, okW bool
	for _, line := range strings.Split(string(b), "\n") {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "syscr":
			c.reads, okR = n, true
		case "syscw":
			c.writes, okW = n, true
		}
	}
	return c, okR && okW
}
