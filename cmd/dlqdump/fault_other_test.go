//go:build !unix

package main

import "os"

// faultArgsEnv marks a child of the fault tests, which run on unix only.
const faultArgsEnv = "DLQDUMP_FAULT_ARGS"

func faultChild(string) int {
	os.Stderr.WriteString("the fault tests run on unix only\n")
	return 1
}
