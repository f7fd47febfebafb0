package text

import (
	"io"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/kiln-ml/kiln/ir"
)

// typeWords are the words that start a type. They lex as their own token
// kind so the optional type in front of a value name needs no backtracking;
// wherever a plain name is allowed the grammar accepts them too.
var typeWords = func() []string {
	words := []string{"seq", "map", "optional", "sparse_tensor", "opaque"}
	for d := ir.DType(1); d.Valid(); d++ {
		words = append(words, d.String())
	}
	return words
}()

var rules = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Comment", Pattern: `#[^\n]*`},
	{Name: "Whitespace", Pattern: `\s+`},
	// A backslash makes the next character literal, whatever it is, as in
	// ONNX's parser; any other byte (newlines included) stands for itself.
	{Name: "String", Pattern: `"(?s:\\.|[^"\\])*"`},
	{Name: "Float", Pattern: `-?(\d+\.\d*([eE][+-]?\d+)?|\d+[eE][+-]?\d+)`},
	{Name: "Int", Pattern: `-?\d+`},
	{Name: "Type", Pattern: `(` + strings.Join(typeWords, "|") + `)\b`},
	{Name: "Ident", Pattern: `[A-Za-z_]\w*`},
	{Name: "Punct", Pattern: `=>|[\[\](){}<>,:=.@?-]`},
})

// textLexer drops comments and whitespace outright rather than leaving
// them in the stream as participle's Elide does, so captured token runs and
// lexer.Token fields hold only meaningful tokens.
var textLexer = skipDefinition{rules}

type skipDefinition struct{ *lexer.StatefulDefinition }

func (d skipDefinition) LexString(filename string, src string) (lexer.Lexer, error) {
	l, err := d.StatefulDefinition.LexString(filename, src)
	return skipLexer{l}, err
}

func (d skipDefinition) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	l, err := d.StatefulDefinition.Lex(filename, r)
	return skipLexer{l}, err
}

type skipLexer struct{ lexer.Lexer }

var (
	tokComment    = rules.Symbols()["Comment"]
	tokWhitespace = rules.Symbols()["Whitespace"]
)

func (l skipLexer) Next() (lexer.Token, error) {
	for {
		t, err := l.Lexer.Next()
		if err != nil || (t.Type != tokComment && t.Type != tokWhitespace) {
			return t, err
		}
	}
}

var parser = participle.MustBuild[astModel](
	participle.Lexer(textLexer),
	// One token of lookahead decides every choice, so an error is
	// reported where it is, not where a backtracked alternative began.
	participle.UseLookahead(1),
)

// The AST mirrors Syntax.md's grammar. Names are kept as tokens so the
// resolver can unquote them and report positions; lists whose slots may be
// empty (node inputs and outputs) and tensor literals are captured as flat
// token runs, commas included, and split by the resolver.

type astModel struct {
	Header []*astField `parser:"('<' @@ (',' @@)* '>')?"`
	Graph  *astGraph   `parser:"@@"`
}

// astField is one `key: value` of the model header.
type astField struct {
	Key   lexer.Token `parser:"@Ident ':'"`
	Value *astScalar  `parser:"( @@"`
	List  []*astPair  `parser:"| '[' (@@ (',' @@)*)? ']' )"`
}

type astScalar struct {
	Tok lexer.Token `parser:"@(String | Int)"`
}

// astPair is a `"key" : value` entry of opset_import, metadata_props and
// external data.
type astPair struct {
	Key   lexer.Token `parser:"@String ':'"`
	Value lexer.Token `parser:"@(String | Int)"`
}

type astGraph struct {
	Name lexer.Token   `parser:"@(Ident | Type | String)"`
	Body *astGraphBody `parser:"@@"`
}

// astGraphBody is a graph after its name; a graph-valued attribute is told
// from a string or inf/nan only by the '(' it starts with.
type astGraphBody struct {
	Inputs  []*astDecl  `parser:"'(' (@@ (',' @@)*)? ')' '=>'"`
	Outputs []*astDecl  `parser:"'(' (@@ (',' @@)*)? ')'"`
	Decls   []*astDecl  `parser:"('<' (@@ (',' @@)*)? '>')?"`
	Nodes   []*astNode  `parser:"'{' @@* '}'"`
}

// astDecl is a value-info (`float[N] X`), possibly with data (`= {...}`).
type astDecl struct {
	Type *astType    `parser:"@@?"`
	Name lexer.Token `parser:"@(Ident | String)"`
	Data *astData    `parser:"('=' @@)?"`
}

type astType struct {
	Pos      lexer.Position
	Seq      *astType       `parser:"  'seq' '(' @@ ')'"`
	Optional *astType       `parser:"| 'optional' '(' @@ ')'"`
	Map      *astMapType    `parser:"| 'map' '(' @@ ')'"`
	Sparse   *astTensorType `parser:"| 'sparse_tensor' '(' @@ ')'"`
	Opaque   bool           `parser:"| @'opaque' '(' (Ident | Type | '.' | ',')* ')'"`
	Tensor   *astTensorType `parser:"| @@"`
}

type astMapType struct {
	Key   lexer.Token `parser:"@Type ','"`
	Value *astType    `parser:"@@"`
}

// astTensorType is `float` (a scalar), `float[]` (unknown rank) or
// `float[2,N,?]`.
type astTensorType struct {
	Elem    lexer.Token   `parser:"@Type"`
	Bracket bool          `parser:"( @'['"`
	Dims    []lexer.Token `parser:"  @(('?' | Int | Ident | Type | String) (',' ('?' | Int | Ident | Type | String))*)? ']' )?"`
}

// astData is a tensor's contents: inline literals or external-data pairs.
type astData struct {
	Pos      lexer.Position
	Inline   bool          `parser:"( @'{'"`
	Values   []lexer.Token `parser:"  @((Int | Float | String | Ident | '-' | ',')*) '}'"`
	External []*astPair    `parser:"| '[' @@ (',' @@)* ']' )"`
}

type astNode struct {
	Pos      lexer.Position
	Labelled bool          `parser:"( @'['"`
	Label    lexer.Token   `parser:"  @(Ident | Type | String)? ']' )?"`
	Outputs  []lexer.Token `parser:"@((Ident | Type | String | ',')*) '='"`
	Op       []string      `parser:"@(Ident | Type) ('.' @(Ident | Type))*"`
	Overload string        `parser:"(':' @Ident)?"`
	Attrs    []*astAttr    `parser:"('<' @@ (',' @@)* '>')?"`
	Inputs   []lexer.Token `parser:"'(' @((Ident | Type | String | ',')*) ')'"`
	Attrs2   []*astAttr    `parser:"('<' @@ (',' @@)* '>')?"`
}

type astAttr struct {
	Pos    lexer.Position
	Name   lexer.Token    `parser:"@(Ident | Type | String)"`
	Kind   string         `parser:"(':' @(Ident | Type))?"`
	IsList bool           `parser:"'=' ( @'['"`
	List   []*astAttrElem `parser:"  (@@ (',' @@)*)? ']'"`
	Single *astAttrElem   `parser:"| @@ )"`
}

type astAttrElem struct {
	Pos   lexer.Position
	Ref   string         `parser:"  '@' @(Ident | Type)"`
	Typed *astTypedValue `parser:"| @@"`
	Named *astNamed      `parser:"| @@"`
	Lit   *astLit        `parser:"| @@"`
}

// astNamed is a string or inf/nan, or, when a graph body follows, the
// graph's name.
type astNamed struct {
	Tok   lexer.Token   `parser:"@(Ident | String)"`
	Graph *astGraphBody `parser:"@@?"`
}

// astTypedValue is a type-proto attribute (`float[2]`) or, when data
// follows, a tensor constant (`float[2] name = {1, 2}`).
type astTypedValue struct {
	Type *astType     `parser:"@@"`
	Name *lexer.Token `parser:"( @(Ident | String)?"`
	Data *astData     `parser:"  '='? @@ )?"`
}

// astLit is a number, or a negated inf or nan (identifiers to the lexer).
type astLit struct {
	Neg bool        `parser:"@'-'?"`
	Tok lexer.Token `parser:"@(Int | Float | Ident)"`
}
