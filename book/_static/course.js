// The course website (book/conf.py).
//
// 1. The ☰ and "Contents" buttons open the navigation. sphinx-book-theme 1.4 and pydata-sphinx-theme 0.20
// bind their click handlers to the *first* `.primary-toggle` / `.secondary-toggle` of the page, a button of
// the theme's top bar that this site (course.css) and the book theme hide, so the visible buttons of the
// article's header did nothing (a known upstream bug). A click on a visible toggle that no theme handler
// took (they all stop its propagation) reaches the document, and is passed on to the bound button: the
// theme then opens its navigation dialog (narrow screens) or folds its sidebar (wide ones). If a later
// theme binds every button, its handler stops the click first and this does nothing.
document.addEventListener("click", (event) => {
  for (const kind of ["primary", "secondary"]) {
    const button = event.target.closest?.(`.${kind}-toggle`);
    const bound = document.querySelector(`.${kind}-toggle`);
    if (button && bound && button !== bound) {
      event.preventDefault();
      bound.click();
      return;
    }
  }
});

// 2. A notebook figure shown smaller than it was drawn opens full size on click.
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("div.cell_output img")) {
    const wrap = () => {
      if (img.closest("a") || img.naturalWidth <= img.clientWidth + 2 || img.clientWidth === 0) return;
      const link = document.createElement("a");
      link.href = img.getAttribute("src");
      link.className = "course-zoom";
      link.title = "Open the figure full size";
      img.replaceWith(link);
      link.appendChild(img);
    };
    if (img.complete) wrap(); else img.addEventListener("load", wrap);
  }
});
