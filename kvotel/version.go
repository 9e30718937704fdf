package kvotel

import "runtime/debug"

// modulePath is this module's path, which ScopeName is too.
const modulePath = "github.com/kvwire/kvwire/kvotel"

// readBuildInfo is debug.ReadBuildInfo; a test replaces it.
var readBuildInfo = debug.ReadBuildInfo

// scopeVersion is the version of the instrumentation scope: this module's
// version as the program's build information records it (a replacement's,
// when the program replaces the module by another version), "" when it
// records none: no build information, the module the program's main one
// or replaced by a directory (its version "(devel)" or empty), as in a
// test.
func scopeVersion() string {
	bi, ok := readBuildInfo()
	if !ok || bi == nil {
		return ""
	}
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		if m == nil || m.Path != modulePath {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if m.Version == "(devel)" {
			return ""
		}
		return m.Version
	}
	return ""
}
