//go:build !unix

package fs_test

// Processes stop themselves with SIGSTOP only on Unix.

func stopInWrite() int { return 2 }

func stopInRenew() int { return 2 }
