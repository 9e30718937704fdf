//go:build !race

package memdx

const raceEnabled = false
