package render

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is a Dynamo runtime version, major.minor.patch.
type Version struct{ Major, Minor, Patch int }

// AtLeast reports whether v >= o.
func (v Version) AtLeast(o Version) bool {
	if v.Major != o.Major {
		return v.Major > o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor > o.Minor
	}
	return v.Patch >= o.Patch
}

// Runtime version gates (Dynamo features/runtime/gates.go): a component whose runtime
// version is unknown gets none of them.
var (
	// gateCanaryHealth: DYN_HEALTH_CHECK_ENABLED=true and a worker liveness
	// failureThreshold of 3 instead of 1.
	gateCanaryHealth = Version{1, 5, 0}
	// gateFrontendStartup: the frontend startup probe and DYN_NAMESPACE_PREFIX_STRICT.
	gateFrontendStartup = Version{1, 6, 0}
)

// semverTag is a tag Dynamo reads as a runtime version: [v]MAJ.MIN.PATCH with an
// optional prerelease and build, no leading zeros (runtimeversion.Resolve).
var semverTag = regexp.MustCompile(`^[vV]?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// RuntimeVersion is the runtime version of a component: the override when set (an
// invalid one is an error), else its main image's tag when the tag is a semver, else
// unknown (ok false). Prerelease and build are dropped, as Dynamo drops them.
func RuntimeVersion(image, override string) (Version, bool, error) {
	if override != "" {
		v, ok := parseVersion(override)
		if !ok {
			return Version{}, false, fmt.Errorf("runtimeVersionOverride %q is not a semantic version (e.g. 1.6.0)", override)
		}
		return v, true, nil
	}
	v, ok := parseVersion(imageTag(image))
	return v, ok, nil
}

// imageTag is the tag of an image reference: after the last ':' that follows the last
// '/', digest removed.
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	name := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return ""
}

func parseVersion(s string) (Version, bool) {
	m := semverTag.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Version{}, false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	patch, _ := strconv.Atoi(m[3])
	return Version{major, minor, patch}, true
}
