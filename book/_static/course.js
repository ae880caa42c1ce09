// The course website: a notebook figure shown smaller than it was drawn opens full size on click.
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
