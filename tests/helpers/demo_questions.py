"""Fill-mask questions for the demo's pretrained model, written for the tests.

Sentences in the style of Python's documentation, written by hand for this test
suite (not taken from the corpus; `test_demo.py` checks that none of them, with
its answer filled in, occurs in the embedded corpus). Each has one [MASK] whose
answer is a common word of the documentation. The demo never trains on them.
"""

QUESTIONS = [
    ("return the number of [MASK] in the list.", "items"),
    ("the default [MASK] of this argument is none.", "value"),
    ("an [MASK] is raised if the key is not found.", "exception"),
    ("this function returns a new [MASK] object.", "string"),
    ("the [MASK] is closed when the block exits.", "file"),
    ("if the argument is omitted, the current [MASK] is used.", "directory"),
    ("each element of the tuple is an [MASK].", "integer"),
    ("the method is called with the instance as its first [MASK].", "argument"),
    ("return true if the object is an instance of the [MASK].", "class"),
    ("the keyword [MASK] may be passed to change the encoding.", "argument"),
    ("the result is returned as a [MASK] of strings.", "list"),
    ("this attribute is read only and cannot be [MASK].", "changed"),
    ("a [MASK] error is raised if the argument has the wrong kind.", "type"),
    ("the values are stored in a [MASK] keyed by name.", "dictionary"),
    ("the loop runs until the [MASK] is exhausted.", "input"),
    ("write the data to the [MASK] and flush the buffer.", "file"),
    ("the server sends a [MASK] to the client.", "message"),
    ("this [MASK] provides functions for working with paths.", "module"),
    ("the [MASK] is evaluated once when the function is defined.", "expression"),
    ("an empty string is returned at the end of the [MASK].", "file"),
    ("the thread waits until the [MASK] is set by another thread.", "event"),
    ("the message [MASK] contains the sender's address.", "header"),
    ("a new [MASK] is created for every call.", "instance"),
    ("return the [MASK] of the first occurrence of the substring.", "index"),
    ("the first line of the [MASK] is the summary.", "docstring"),
    ("the handler is called with one [MASK] and returns nothing.", "argument"),
    ("if no name is given, the default [MASK] is used.", "name"),
    ("the name of the [MASK] is stored in the attribute.", "module"),
]
