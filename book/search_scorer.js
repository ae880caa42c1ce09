// The course website's search ranking (book/conf.py, html_search_scorer): Sphinx's default scores, and every
// lesson before every answer twin (notebooks/solutions/, titled "Answers: …"), whose text repeats its
// lesson's: a search lists the lessons first, then the answers, each group in Sphinx's own order.
var Scorer = {
  score: (result) => {
    const [docname, _title, _anchor, _descr, score] = result;
    return docname.startsWith("notebooks/solutions/") ? score - 100000 : score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
