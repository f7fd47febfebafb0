package text

import (
	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

var parser = participle.MustBuild[astModel](
	participle.Lexer(textLexer{}),
	// One token of lookahead decides every choice, so an error is
	// reported where it is, not where a backtracked alternative began.
	participle.UseLookahead(1),
)

// The AST mirrors Syntax.md's grammar. Names are kept as tokens so the
// resolver can unquote them and report positions; lists whose slots may be
// empty (node inputs and outputs) and tensor literals are captured as flat
// token runs, commas included, and split by the resolver. Tensor literals
// are single Data tokens, scanned by the resolver.

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
	Inputs  []*astDecl `parser:"'(' (@@ (',' @@)*)? ')' '=>'"`
	Outputs []*astDecl `parser:"'(' (@@ (',' @@)*)? ')'"`
	Decls   []*astDecl `parser:"('<' (@@ (',' @@)*)? '>')?"`
	Nodes   []*astNode `parser:"'{' @@* '}'"`
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
	Inline   *lexer.Token `parser:"  @Data"`
	External []*astPair   `parser:"| '[' @@ (',' @@)* ']'"`
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
