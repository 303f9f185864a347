package validation_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/test/harness"
)

// invalidDir holds one bad manifest per file; the first line of each is
// "# want: <substring of the admission error>", a substring that names the field.
var invalidDir = filepath.Join(harness.RepoRoot(), "test", "testdata", "invalid")

type invalidCase struct {
	file string
	want string
	doc  []byte
}

// loadInvalid reads every manifest of invalidDir and its wanted error.
func loadInvalid() []invalidCase {
	files, err := filepath.Glob(filepath.Join(invalidDir, "*.yaml"))
	if err != nil {
		panic(err)
	}
	var out []invalidCase
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			panic(err)
		}
		first, _, _ := strings.Cut(string(raw), "\n")
		want, ok := strings.CutPrefix(first, "# want: ")
		if !ok || strings.TrimSpace(want) == "" {
			panic(f + ": the first line must be `# want: <substring of the error>`")
		}
		out = append(out, invalidCase{file: filepath.Base(f), want: strings.TrimSpace(want), doc: raw})
	}
	return out
}

// parse decodes a manifest into an unstructured object, as kubectl does before it
// sends it: the server sees the fields exactly as written.
func parse(doc []byte) *unstructured.Unstructured {
	GinkgoHelper()
	var m map[string]any
	Expect(yaml.Unmarshal(doc, &m)).To(Succeed())
	return &unstructured.Unstructured{Object: m}
}

var _ = Describe("invalid manifests", func() {
	cases := loadInvalid()

	It("has at least 25 of them", func() {
		Expect(len(cases)).To(BeNumerically(">=", 25))
	})

	var entries []TableEntry
	for _, c := range cases {
		entries = append(entries, Entry(c.file, c))
	}
	DescribeTable("are rejected at admission, under strict field validation, with a message naming the field",
		func(c invalidCase) {
			u := parse(c.doc)
			u.SetNamespace(newNamespace())
			err := env.Client.Create(ctx, u, client.FieldValidation("Strict"))
			Expect(err).To(HaveOccurred(), "%s was accepted", c.file)
			Expect(err.Error()).To(ContainSubstring(c.want), "%s", c.file)
		},
		entries,
	)
})
