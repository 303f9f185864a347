package install

import (
	"bufio"
	"bytes"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/dgd-rollout/operator/test/cluster"
)

// instruction is one Dockerfile instruction: its keyword (upper case), its flags
// (--from=..., --mount=...) and the rest of the line.
type instruction struct {
	cmd   string
	flags []string
	args  string
}

// stage is one FROM ... [AS name] and its instructions.
type stage struct {
	name, from string
	flags      []string // of FROM
	insts      []instruction
}

// parseDockerfile reads the stages of a Dockerfile: comments and parser directives
// dropped, backslash continuations joined, leading --flags split off (the subset of the
// syntax this repository's Dockerfile uses; anything else fails the test).
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	var stages []stage
	for _, line := range lines {
		cmd, rest, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd)}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			f, r, _ := strings.Cut(rest, " ")
			in.flags, rest = append(in.flags, f), strings.TrimSpace(r)
		}
		in.args = rest
		switch in.cmd {
		case "FROM":
			f := strings.Fields(rest)
			st := stage{from: f[0], flags: in.flags}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
		case "ARG", "WORKDIR", "COPY", "RUN", "USER", "ENTRYPOINT", "ENV":
			if len(stages) == 0 {
				t.Fatalf("%s before FROM", in.cmd)
			}
			stages[len(stages)-1].insts = append(stages[len(stages)-1].insts, in)
		default:
			t.Fatalf("Dockerfile instruction %s: the test does not model it", in.cmd)
		}
	}
	return stages
}

func flag(in instruction, name string) (string, bool) {
	for _, f := range in.flags {
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// buildContext copies the files of root that .dockerignore lets into a build context
// (Docker's own matcher, moby/patternmatcher, as the docker CLI and BuildKit use it)
// into dst.
func buildContext(t *testing.T, root, dst string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		skip, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if skip {
			if d.IsDir() && !pm.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDockerfile proves, without a Docker engine, that the image builds: it copies the
// build context (.dockerignore applied by Docker's matcher) into a temporary root,
// performs the build stage's COPY instructions into its WORKDIR and runs its RUN
// commands there (cache mounts dropped, BuildKit's TARGETOS/TARGETARCH set, paths
// outside WORKDIR mapped into the root), then checks that the file the final stage
// copies from the build stage exists and is a static Linux executable of the target
// architecture. A package the manager imports that the context leaves out fails the
// build, as it would fail `docker build`; the test also names the packages missing.
// Another architecture than the host's (arm64 for Grace nodes) is checked with
// `go list` (every imported package has files for it) instead of a second full build.
func TestDockerfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager")
	}
	root := cluster.RepoRoot()
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("want a build stage and a final stage, got %d stages", len(stages))
	}
	final := stages[len(stages)-1]
	var from, artifact, dest string
	for _, in := range final.insts {
		if f, ok := flag(in, "from"); ok && in.cmd == "COPY" {
			parts := strings.Fields(in.args)
			from, artifact, dest = f, parts[0], parts[1]
		}
		if in.cmd == "USER" && !strings.HasPrefix(in.args, "65532") {
			t.Errorf("final stage runs as %q, want the non-root 65532", in.args)
		}
		if in.cmd == "ENTRYPOINT" && !strings.Contains(in.args, dest) {
			t.Errorf("ENTRYPOINT %s does not run %s", in.args, dest)
		}
	}
	var build *stage
	for i := range stages {
		if stages[i].name == from {
			build = &stages[i]
		}
	}
	if build == nil {
		t.Fatalf("final stage copies from %q: no such stage", from)
	}
	if !contains(build.flags, "--platform=$BUILDPLATFORM") {
		t.Errorf("build stage FROM %v %s: want --platform=$BUILDPLATFORM (cross-compile on the builder, no emulation)", build.flags, build.from)
	}

	ctxDir, rootfs := t.TempDir(), t.TempDir()
	buildContext(t, root, ctxDir)
	arch := runtime.GOARCH
	env := append(os.Environ(), "TARGETOS=linux", "TARGETARCH="+arch, "BUILDPLATFORM=linux/"+arch,
		"GOFLAGS=-mod=mod", "GOWORK=off")
	workdir := rootfs
	var args []string
	for _, in := range build.insts {
		switch in.cmd {
		case "ARG":
			args = append(args, in.args)
		case "WORKDIR":
			workdir = filepath.Join(rootfs, in.args)
			if err := os.MkdirAll(workdir, 0o755); err != nil {
				t.Fatal(err)
			}
		case "COPY":
			f := strings.Fields(in.args)
			srcs, dst := f[:len(f)-1], f[len(f)-1]
			for _, src := range srcs {
				copyInto(t, filepath.Join(ctxDir, src), filepath.Join(workdir, dst), strings.HasSuffix(dst, "/") || len(srcs) > 1)
			}
		case "RUN":
			script := strings.ReplaceAll(in.args, " /out/", " "+filepath.Join(rootfs, "out")+"/")
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir, cmd.Env = workdir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				missingPackages(t, root, ctxDir)
				t.Fatalf("RUN %s: %v\n%s", in.args, err, out)
			}
		}
	}
	for _, a := range []string{"TARGETOS", "TARGETARCH"} {
		if !contains(args, a) {
			t.Errorf("build stage declares no ARG %s: the image would be built for the builder's platform", a)
		}
	}
	bin := filepath.Join(rootfs, artifact)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the final stage copies %s from the build stage: %v", artifact, err)
	}
	defer f.Close()
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; want != 0 && f.Machine != want {
		t.Errorf("%s is for %v, want %v", artifact, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked: distroless/static has no libc", artifact)
		}
	}

	// The other architecture: every package the manager imports has files for it.
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[arch]
	cmd := exec.Command("go", "list", "-deps", "-e", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}{{if .DepsErrors}}{{.ImportPath}}: {{.DepsErrors}}{{end}}", "./cmd/manager")
	cmd.Dir = filepath.Join(rootfs, "src")
	cmd.Env = append(env, "GOOS=linux", "GOARCH="+other, "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("linux/%s: %v\n%s", other, err, out)
	}
}

// missingPackages names the packages of this module the manager imports that the build
// context left out.
func missingPackages(t *testing.T, root, ctxDir string) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/manager")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("go list: %v", err)
		return
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, _ := filepath.Rel(root, dir)
		if _, err := os.Stat(filepath.Join(ctxDir, rel)); err != nil {
			t.Errorf("the manager imports ./%s, which the build context leaves out (.dockerignore)", rel)
		}
	}
}

// copyInto copies src (a file or a directory's contents) to dst as Docker's COPY does.
func copyInto(t *testing.T, src, dst string, dstIsDir bool) {
	t.Helper()
	info, err := os.Stat(src)
	if err != nil {
		t.Fatalf("COPY %s: %v (not in the build context)", src, err)
	}
	if !info.IsDir() {
		if dstIsDir {
			dst = filepath.Join(dst, filepath.Base(src))
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.Command("cp", "-a", src+"/.", dst+"/")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("COPY %s %s: %v\n%s", src, dst, err, out)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
